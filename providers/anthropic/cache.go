package anthropic

import (
	"bytes"
	"encoding/json"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/providers"
)

// Prompt caching. The Messages API caches a request's prompt up to each
// block marked with cache_control (a breakpoint, at most
// MaxBreakpoints in a request), in the order tools, system, messages,
// and a later request that starts with the same blocks reads them from
// the cache (at a tenth of the price; writing costs a quarter more). The
// runtime lays a request out with what stays the same first
// (providers.SystemText), so the breakpoints go at the ends of its
// stable parts, most valuable first:
//
//  1. the end of the history: the last block before the new user
//     message (providers.Segment.New), which the next request of the
//     conversation repeats;
//  2. the end of the system prompt's stable part (instructions and
//     pinned facts; the last tool when there is none), which holds
//     across folds;
//  3. the end of the summary, which changes at each fold only;
//  4. within a tool loop, the end of the request, which the loop's next
//     step repeats.
//
// The new user message itself, which starts with the retrieved memory,
// is never cached: the next request holds it without its memory. A
// prompt shorter than the model's minimum (1,024 tokens for most) is not
// cached, without error.

// MaxBreakpoints is the most blocks with cache_control a Messages
// request may hold.
const MaxBreakpoints = 4

// cacheControl is the cache_control the runtime's breakpoints carry,
// and whether req gets any: when the client asked for caching
// (req.Params.CacheControl, its TTL kept), or else when the model's cache
// option is on (on), with the API's default TTL.
func cacheControl(on bool, req providers.Request) (sdk.CacheControlEphemeralParam, bool) {
	cc := sdk.NewCacheControlEphemeralParam()
	if asked := req.Params.CacheControl; asked != nil {
		cc.TTL = sdk.CacheControlEphemeralTTL(asked.TTL)
		return cc, true
	}
	return cc, on
}

// markCache sets the breakpoints described above on params, built from
// c with its new part starting at start (layoutMessages), while the
// request holds fewer than MaxBreakpoints (blocks sent as they came may
// carry their own).
func markCache(params *sdk.MessageNewParams, c messages.AssembledContext, start blockAt, cc sdk.CacheControlEphemeralParam) {
	left := MaxBreakpoints - rawBreakpoints(params.Messages)
	mark := func(ok bool) {
		if ok {
			left--
		}
	}
	// 1. The end of the history.
	if left > 0 && start.msg >= 0 {
		mark(markBefore(params.Messages, start, cc))
	}
	// 2 and 3. The system prompt in two blocks: stable, then summary.
	stable, summary := providers.SystemParts(c)
	var sys []sdk.TextBlockParam
	if stable != "" {
		sys = append(sys, sdk.TextBlockParam{Text: stable})
	}
	if summary != "" {
		sys = append(sys, sdk.TextBlockParam{Text: summary})
	}
	if len(sys) > 0 {
		params.System = sys
	}
	if left > 0 && stable != "" {
		params.System[0].CacheControl = cc
		left--
	} else if left > 0 && len(params.Tools) > 0 {
		last := &params.Tools[len(params.Tools)-1]
		if raw, ok := overrideJSON(*last); ok {
			*last = param.Override[sdk.ToolUnionParam](withCacheControl(raw, cc))
			left--
		}
	}
	if left > 0 && summary != "" {
		params.System[len(params.System)-1].CacheControl = cc
		left--
	}
	// 4. The end of a tool loop's request.
	if left > 0 && len(c.Continuation) > 0 {
		last := len(params.Messages) - 1
		markBefore(params.Messages, blockAt{last, len(params.Messages[last].Content)}, cc)
	}
}

// markBefore marks the last block before at that can carry a breakpoint
// (not a thinking block, not one marked already), and reports whether
// it found one.
func markBefore(msgs []sdk.MessageParam, at blockAt, cc sdk.CacheControlEphemeralParam) bool {
	for m, b := at.msg, at.block-1; m >= 0; m-- {
		if m < at.msg {
			b = len(msgs[m].Content) - 1
		}
		for ; b >= 0; b-- {
			if markBlock(&msgs[m].Content[b], cc) {
				return true
			}
		}
	}
	return false
}

// markBlock sets cc on block when it can carry a breakpoint and has none,
// and reports whether it did.
func markBlock(block *sdk.ContentBlockParamUnion, cc sdk.CacheControlEphemeralParam) bool {
	if raw, ok := overrideJSON(*block); ok {
		var head struct {
			Type         string          `json:"type"`
			CacheControl json.RawMessage `json:"cache_control"`
		}
		if json.Unmarshal(raw, &head) != nil || head.CacheControl != nil ||
			head.Type == "thinking" || head.Type == "redacted_thinking" {
			return false
		}
		*block = param.Override[sdk.ContentBlockParamUnion](withCacheControl(raw, cc))
		return true
	}
	p := block.GetCacheControl()
	if p == nil || block.OfThinking != nil || block.OfRedactedThinking != nil || !param.IsOmitted(*p) {
		return false
	}
	*p = cc
	return true
}

// overrideJSON is the JSON of a param built with param.Override (the
// blocks and tools sent as they came or as written here).
func overrideJSON(v interface{ Overrides() (any, bool) }) (json.RawMessage, bool) {
	o, ok := v.Overrides()
	if !ok {
		return nil, false
	}
	raw, ok := o.(json.RawMessage)
	return raw, ok && isObject(raw)
}

// withCacheControl is the JSON object raw with a cache_control member cc
// added last (its other members kept in their order).
func withCacheControl(raw json.RawMessage, cc sdk.CacheControlEphemeralParam) json.RawMessage {
	ccJSON, _ := json.Marshal(cc)
	obj := bytes.TrimRight(providers.CompactJSON(raw), " \t\r\n")
	out := make([]byte, 0, len(obj)+len(ccJSON)+20)
	out = append(out, obj[:len(obj)-1]...)
	if len(obj) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"cache_control":`...)
	out = append(out, ccJSON...)
	return append(out, '}')
}

// rawBreakpoints counts the blocks of msgs sent as they came that carry
// a cache_control of their own.
func rawBreakpoints(msgs []sdk.MessageParam) int {
	n := 0
	for _, m := range msgs {
		for _, b := range m.Content {
			if raw, ok := overrideJSON(b); ok {
				var head struct {
					CacheControl json.RawMessage `json:"cache_control"`
				}
				if json.Unmarshal(raw, &head) == nil && head.CacheControl != nil && string(head.CacheControl) != "null" {
					n++
				}
			}
		}
	}
	return n
}

package providers

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/contextinfinity/ctxinf/messages"
)

// RedactRule is one configured redaction (redaction.patterns): every
// match of Pattern, an RE2 regular expression, in text sent to a provider
// or an embedder is replaced by Replacement, which may refer to the
// match's groups as regexp.Expand does ($1, ${name}); "" means
// DefaultReplacement.
type RedactRule struct {
	Pattern     string
	Replacement string
}

// Limits of a redaction configuration, checked by NewRedactor (and by
// internal/config at load).
const (
	MaxRedactRules        = 100
	MaxRedactPatternBytes = 1024 // of each pattern and each replacement
)

// DefaultReplacement replaces a match of a rule without a replacement,
// and every secret a Scrubber finds.
const DefaultReplacement = "[redacted]"

// ErrBadRedactRule is returned by NewRedactor for a rule it cannot use.
var ErrBadRedactRule = errors.New("providers: bad redaction rule")

// Redactor rewrites what is sent to providers and embedders by its rules
// (SRD §14.1), in order. A nil *Redactor changes nothing. It is safe for
// concurrent use.
type Redactor struct {
	rules []redactRule
}

type redactRule struct {
	re   *regexp.Regexp
	repl string
}

// NewRedactor compiles rules. It fails, naming the rule's index, for
// more than MaxRedactRules rules, a pattern or replacement over
// MaxRedactPatternBytes, a pattern that is not a valid RE2 expression,
// and a pattern that matches the empty string (it would insert its
// replacement between every two characters). No rules give nil.
func NewRedactor(rules []RedactRule) (*Redactor, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	if len(rules) > MaxRedactRules {
		return nil, fmt.Errorf("%w: %d rules, at most %d", ErrBadRedactRule, len(rules), MaxRedactRules)
	}
	r := &Redactor{rules: make([]redactRule, len(rules))}
	for i, rule := range rules {
		re, err := CompileRedactPattern(rule.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%w: rule %d: pattern: %w", ErrBadRedactRule, i, err)
		}
		if len(rule.Replacement) > MaxRedactPatternBytes {
			return nil, fmt.Errorf("%w: rule %d: replacement: %d bytes, at most %d", ErrBadRedactRule, i,
				len(rule.Replacement), MaxRedactPatternBytes)
		}
		repl := rule.Replacement
		if repl == "" {
			repl = DefaultReplacement
		}
		r.rules[i] = redactRule{re: re, repl: repl}
	}
	return r, nil
}

// CompileRedactPattern compiles one rule's pattern with NewRedactor's
// checks (length, RE2 syntax, no empty match).
func CompileRedactPattern(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, errors.New("must not be empty")
	}
	if len(pattern) > MaxRedactPatternBytes {
		return nil, fmt.Errorf("%d bytes, at most %d", len(pattern), MaxRedactPatternBytes)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	if re.MatchString("") {
		return nil, fmt.Errorf("%q matches the empty string", pattern)
	}
	return re, nil
}

// Text returns s with every rule applied.
func (r *Redactor) Text(s string) string {
	if r == nil {
		return s
	}
	for _, rule := range r.rules {
		if rule.re.MatchString(s) {
			s = rule.re.ReplaceAllString(s, rule.repl)
		}
	}
	return s
}

// Texts returns texts redacted; texts itself when nothing matched.
func (r *Redactor) Texts(texts []string) []string {
	if r == nil {
		return texts
	}
	var out []string
	for i, t := range texts {
		red := r.Text(t)
		if red != t && out == nil {
			out = slices.Clone(texts)
		}
		if out != nil {
			out[i] = red
		}
	}
	if out == nil {
		return texts
	}
	return out
}

// JSON returns raw with every string in it (values and keys) redacted,
// everything else kept byte for byte; raw itself when nothing matched.
// A value that is not valid JSON is redacted as text.
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if r == nil || len(raw) == 0 || !r.matches(raw) {
		return raw
	}
	if !json.Valid(raw) {
		return json.RawMessage(r.Text(string(raw)))
	}
	var out []byte
	last := 0
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		end := stringEnd(raw, i)
		var s string
		if json.Unmarshal(raw[i:end], &s) == nil {
			if red := r.Text(s); red != s {
				quoted, _ := json.Marshal(red)
				out = append(append(out, raw[last:i]...), quoted...)
				last = end
			}
		}
		i = end - 1
	}
	if out == nil {
		return raw
	}
	return append(out, raw[last:]...)
}

// stringEnd returns the index after the closing quote of the JSON string
// that opens at raw[start].
func stringEnd(raw []byte, start int) int {
	for i := start + 1; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(raw)
}

// matches reports whether some rule matches b.
func (r *Redactor) matches(b []byte) bool {
	for _, rule := range r.rules {
		if rule.re.Match(b) {
			return true
		}
	}
	return false
}

// Context returns ac with every text the model receives redacted: the
// system instructions, pinned facts, summary, window, pending turns,
// retrieved memory, the user's message, the tool loop's continuation
// (tool calls' arguments and tool outputs included) and the tools'
// descriptions and schemas. Reasoning and unknown items (the provider's
// own output, sent back as it came: signed or encrypted) and images are
// sent as they are. ac's messages are not changed in place: what changed is
// copied.
func (r *Redactor) Context(ac messages.AssembledContext) messages.AssembledContext {
	if r == nil {
		return ac
	}
	ac.SystemInstructions = r.Text(ac.SystemInstructions)
	ac.PinnedFacts = r.Texts(ac.PinnedFacts)
	ac.Summary = r.Text(ac.Summary)
	ac.Window = r.messages(ac.Window)
	ac.Pending = r.messages(ac.Pending)
	if len(ac.Retrieved) > 0 {
		ret := make([]messages.RetrievedChunk, len(ac.Retrieved))
		for i, c := range ac.Retrieved {
			c.Text = r.Text(c.Text)
			ret[i] = c
		}
		ac.Retrieved = ret
	}
	ac.User = r.Message(ac.User)
	if len(ac.Continuation) > 0 {
		items := make(messages.Items, len(ac.Continuation))
		for i, it := range ac.Continuation {
			items[i] = r.item(it)
		}
		ac.Continuation = items
	}
	if len(ac.Tools) > 0 {
		tools := make([]messages.Tool, len(ac.Tools))
		for i, t := range ac.Tools {
			t.Description = r.Text(t.Description)
			t.InputSchema = r.JSON(t.InputSchema)
			tools[i] = t
		}
		ac.Tools = tools
	}
	return ac
}

func (r *Redactor) messages(ms []messages.Message) []messages.Message {
	if len(ms) == 0 {
		return ms
	}
	out := make([]messages.Message, len(ms))
	for i, m := range ms {
		out[i] = r.Message(m)
	}
	return out
}

// Message returns m with its text redacted (its blocks and RenderedText).
func (r *Redactor) Message(m messages.Message) messages.Message {
	if r == nil {
		return m
	}
	m.Blocks = r.blocks(m.Blocks)
	m.RenderedText = r.Text(m.RenderedText)
	return m
}

func (r *Redactor) blocks(bs messages.Blocks) messages.Blocks {
	if len(bs) == 0 {
		return bs
	}
	out := make(messages.Blocks, len(bs))
	for i, b := range bs {
		out[i] = r.block(b)
	}
	return out
}

func (r *Redactor) block(b messages.ContentBlock) messages.ContentBlock {
	switch b := b.(type) {
	case messages.Text:
		b.Text = r.Text(b.Text)
		return b
	case messages.ToolUse:
		b.Input = r.JSON(b.Input)
		return b
	case messages.ToolResult:
		b.Content = r.blocks(b.Content)
		return b
	}
	return b // reasoning and unknown blocks: the provider's own, sent back as they came
}

func (r *Redactor) item(it messages.TranscriptItem) messages.TranscriptItem {
	switch it := it.(type) {
	case messages.AssistantMessage:
		it.Blocks = r.blocks(it.Blocks)
		return it
	case messages.ToolCall:
		it.Arguments = r.JSON(it.Arguments)
		return it
	case messages.ToolOutput:
		it.Output = r.JSON(it.Output)
		return it
	}
	return it // reasoning and unknown items: the provider's own, sent back as they came
}

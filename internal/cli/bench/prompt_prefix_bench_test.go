package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/cli"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/internal/server"
	"github.com/contextinfinity/ctxinf/internal/wiring"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/tokens"
)

// BenchmarkProxyPromptPrefix measures how much of each prompt the
// runtime sends upstream a provider's prompt cache could reuse: a client
// holds a conversation of prefixTurns turns with the proxy (Chat
// Completions, each request resending the whole conversation, as
// clients do), the runtime runs on the default configuration (window,
// folds, retrieval; CTX_* variables change it) against a fake upstream
// that records every request, and for each request after the first the
// share of its prompt tokens that equal the start of the request before
// it is taken. It reports their mean and median (prefix-mean,
// prefix-median; 1 is a prompt wholly cached), and what keeps them down:
// the requests whose system prompt changed because a fold rewrote the
// summary (folds), the mean over the others (prefix-mean-no-fold), and
// the share of the prompt that is retrieved memory (memory-share), new
// to each request. The clients are a bare one (user messages only) and
// an agent (a long system prompt and four tools); the upstreams OpenAI's
// Chat Completions and Anthropic's Messages.
//
// Run it with
//
//	go test ./internal/cli/bench -run '^$' -bench BenchmarkProxyPromptPrefix -benchtime=1x
func BenchmarkProxyPromptPrefix(b *testing.B) {
	for _, upstream := range []string{"openai", "anthropic"} {
		for _, client := range []string{"bare", "agent"} {
			b.Run("upstream="+upstream+"/client="+client, func(b *testing.B) {
				var fig prefixFigures
				for b.Loop() {
					fig = runPromptPrefix(b, upstream, client == "agent", prefixTurns)
				}
				b.ReportMetric(fig.Mean, "prefix-mean")
				b.ReportMetric(fig.Median, "prefix-median")
				b.ReportMetric(fig.Tokens, "prompt-tokens/req")
				b.ReportMetric(float64(fig.Folds), "folds")
				b.ReportMetric(fig.MeanNoFold, "prefix-mean-no-fold")
				b.ReportMetric(fig.Memory, "memory-share")
			})
		}
	}
}

// prefixTurns is the length of the benchmark's conversation.
const prefixTurns = 50

// prefixFigures are the figures of one conversation: the mean and median
// share of a request's prompt tokens that equal the start of the request
// before it, and the mean prompt tokens of a request; how many requests
// had a system prompt other than the request before (Folds), the mean
// share of the others, and the share of all prompt tokens that were
// retrieved memory.
type prefixFigures struct {
	Mean, Median, Tokens float64
	Folds                int
	MeanNoFold, Memory   float64
	Shares               []float64
}

// runPromptPrefix holds one conversation of turns turns through the
// proxy and measures the prompts its upstream received.
func runPromptPrefix(b *testing.B, upstream string, agent bool, turns int) prefixFigures {
	b.Helper()
	up := fakeapi.NewFunc(func(n int, r fakeapi.Request) fakeapi.Reply {
		reply := prefixReply(n)
		if upstream == "anthropic" {
			return fakeapi.NewAnthropicStream().Text(reply).Stop("end_turn")
		}
		return fakeapi.ChatText("stop", reply)
	})
	defer up.Close()

	b.Setenv("CTX_BENCH_UPSTREAM_KEY", "sk-bench")
	// The defaults, and CTX_* variables: CTX_CONTEXT_OVERFLOW_MESSAGES=20
	// measures another fold policy.
	cfg, err := config.Load("")
	if err != nil {
		b.Fatal(err)
	}
	cfg.DataDir = b.TempDir()
	cfg.Store.Durability = config.DurabilityRelaxed
	cfg.Retrieval.Embedder = config.EmbedderHash
	m := config.ModelConfig{Provider: upstream, ModelID: "gpt-5.4-mini", ContextLimit: 128000,
		APIKeyEnv: "CTX_BENCH_UPSTREAM_KEY", BaseURL: up.URL + "/v1", API: "chat", Truncation: "disabled"}
	if upstream == "anthropic" {
		m.ModelID, m.BaseURL, m.API = "claude-sonnet-5-5", up.URL, ""
	}
	cfg.Models = map[string]config.ModelConfig{"bench": m}
	cfg.DefaultModel = "bench"
	e := &cli.Env{Config: cfg, Log: zerolog.Nop(), Scrub: wiring.Scrubber(cfg, os.Getenv)}
	rcfg, err := e.RuntimeConfig()
	if err != nil {
		b.Fatal(err)
	}
	rt, err := e.OpenRuntimeWith(context.Background(), rcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	opts := server.OptionsOf(e.Config.Server)
	opts.Log = zerolog.Nop()
	s, err := server.New(rt.Runtime, opts)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()

	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var msgs []message
	if agent {
		msgs = append(msgs, message{"system", agentSystemPrompt})
	}
	rng := rand.New(rand.NewPCG(7, 33))
	for turn := range turns {
		msgs = append(msgs, message{"user", prefixUserMessage(rng, turn)})
		req := map[string]any{"model": "bench", "messages": msgs}
		if agent {
			req["tools"] = agentTools
		}
		body, _ := json.Marshal(req)
		hr, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", bytes.NewReader(body))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set(server.ProxyConversationHeader, "prefix-bench")
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			b.Fatal(err)
		}
		var out struct {
			Choices []struct {
				Message message `json:"message"`
			} `json:"choices"`
		}
		data := new(bytes.Buffer)
		_, _ = data.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || json.Unmarshal(data.Bytes(), &out) != nil || len(out.Choices) != 1 {
			b.Fatalf("turn %d: %d %s", turn, resp.StatusCode, data)
		}
		msgs = append(msgs, out.Choices[0].Message)
	}
	if n := up.Count(); n != turns {
		b.Fatalf("the upstream got %d requests for %d turns", n, turns)
	}
	count := tokens.ForModel(upstream, m.ModelID)
	var prompts [][]segment
	for _, r := range up.Requests() {
		prompts = append(prompts, promptSegments(b, upstream, r.Body))
	}
	return prefixShares(prompts, count.Count)
}

// segment is a part of a prompt: a tool, a system block, a message's
// part, or the retrieved memory that starts a user message.
type segment struct {
	system, memory bool
	text           string
}

// prefixShares is the figures of a conversation's prompts, each a list
// of segments in prompt order, counted by count: for each prompt after
// the first, the tokens of its segments equal to the previous prompt's,
// up to the first that differs, plus the common start of that one, over
// its tokens.
func prefixShares(prompts [][]segment, count func(string) int) prefixFigures {
	var fig prefixFigures
	total, memory := 0, 0
	var steady []float64
	system := func(p []segment) string {
		var sb strings.Builder
		for _, s := range p {
			if s.system {
				sb.WriteString(s.text)
			}
		}
		return sb.String()
	}
	for i, p := range prompts {
		all := 0
		for _, s := range p {
			n := count(s.text)
			all += n
			if s.memory {
				memory += n
			}
		}
		total += all
		if i == 0 || all == 0 {
			continue
		}
		prev, same := prompts[i-1], 0
		for j, s := range p {
			if j >= len(prev) {
				break
			}
			if s.text == prev[j].text {
				same += count(s.text)
				continue
			}
			k := 0
			for k < len(s.text) && k < len(prev[j].text) && s.text[k] == prev[j].text[k] {
				k++
			}
			same += count(s.text[:k])
			break
		}
		share := float64(same) / float64(all)
		fig.Shares = append(fig.Shares, share)
		if system(p) != system(prev) {
			fig.Folds++
		} else {
			steady = append(steady, share)
		}
	}
	if len(fig.Shares) == 0 {
		return fig
	}
	fig.Mean, fig.MeanNoFold = mean(fig.Shares), mean(steady)
	sorted := slices.Sorted(slices.Values(fig.Shares))
	n := len(sorted)
	fig.Median = (sorted[(n-1)/2] + sorted[n/2]) / 2
	fig.Tokens = float64(total) / float64(len(prompts))
	fig.Memory = float64(memory) / float64(total)
	return fig
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// promptSegments is a request body as the model reads it, in prompt
// order, one segment per tool, system block and message part: tools,
// then the system prompt, then the messages (each its role and text,
// other parts as their JSON; the retrieved memory a segment of its own).
// Prompt-cache markers (cache_control) are left out: they are not part
// of the prompt.
func promptSegments(b *testing.B, upstream string, body []byte) []segment {
	b.Helper()
	var req struct {
		System   json.RawMessage   `json:"system"`
		Messages []json.RawMessage `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		b.Fatalf("upstream request %s: %v", body, err)
	}
	var segs []segment
	for _, t := range req.Tools {
		segs = append(segs, segment{text: "tool " + withoutCacheControl(t)})
	}
	if len(req.System) > 0 {
		segs = append(segs, contentSegments("system", req.System)...)
	}
	for _, raw := range req.Messages {
		var m struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			b.Fatalf("upstream message %s: %v", raw, err)
		}
		segs = append(segs, contentSegments(m.Role, m.Content)...)
		if len(m.ToolCalls) > 0 {
			segs = append(segs, segment{text: string(m.ToolCalls)})
		}
	}
	return segs
}

// contentSegments is a message's content: a string, or a list of parts,
// each part's text when it has text and its JSON otherwise, the
// retrieved memory a text starts with apart; the first segment starts
// with role.
func contentSegments(role string, content json.RawMessage) []segment {
	segs := []segment{{system: role == "system", text: role + "\n"}}
	text := func(s string) {
		if mem, rest, ok := strings.Cut(s, providers.MemoryEnd+"\n\n"); ok && strings.HasPrefix(s, providers.UntrustedPreamble) {
			segs = append(segs, segment{memory: true, text: mem + providers.MemoryEnd + "\n\n"})
			s = rest
		}
		segs = append(segs, segment{system: role == "system", text: s})
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		text(s)
		return segs
	}
	var parts []json.RawMessage
	_ = json.Unmarshal(content, &parts)
	for _, p := range parts {
		var part struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(p, &part)
		if part.Type == "text" {
			text(part.Text)
			continue
		}
		segs = append(segs, segment{text: withoutCacheControl(p)})
	}
	return segs
}

// withoutCacheControl is a JSON object's text without its cache_control
// key.
func withoutCacheControl(raw json.RawMessage) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return string(raw)
	}
	delete(obj, "cache_control")
	data, _ := json.Marshal(obj)
	return string(data)
}

// prefixTopics are what the benchmark's user talks about, so that
// retrieval has earlier turns to find.
var prefixTopics = []string{
	"the garden irrigation plan", "the quarterly budget review", "our trip to Lisbon in May",
	"the database migration to PostgreSQL", "the cello lessons schedule", "the kitchen renovation quotes",
	"the beagle's vaccination record", "the conference talk about actors", "the solar panel installation",
}

var prefixWords = strings.Fields("alpha bravo river stone copper maple orbit lantern meadow harbor " +
	"signal cedar violet summit canyon ember falcon glacier juniper kestrel lagoon marble nectar " +
	"quartz saffron tundra willow zephyr amber basil cobalt dune fern grove heron iris jade kelp")

// prefixUserMessage is the user's message of turn: about one of the
// topics, with a detail to remember.
func prefixUserMessage(rng *rand.Rand, turn int) string {
	topic := prefixTopics[rng.IntN(len(prefixTopics))]
	words := make([]string, 30)
	for i := range words {
		words[i] = prefixWords[rng.IntN(len(prefixWords))]
	}
	return fmt.Sprintf("Turn %d. Let us talk about %s again. Please note the code %s-%d and keep these details: %s. "+
		"What should I do next about %s?", turn+1, topic, prefixWords[rng.IntN(len(prefixWords))], rng.IntN(1000),
		strings.Join(words, " "), topic)
}

// prefixReply is the upstream's answer to its n-th request: about 120
// words.
func prefixReply(n int) string {
	var sb strings.Builder
	sb.WriteString("Here is what I suggest, step " + strconv.Itoa(n+1) + ". ")
	for i := range 110 {
		sb.WriteString(prefixWords[(n*7+i*3)%len(prefixWords)])
		if i%12 == 11 {
			sb.WriteString(". ")
		} else {
			sb.WriteByte(' ')
		}
	}
	sb.WriteString("That should settle it.")
	return sb.String()
}

// agentSystemPrompt is the agent client's system prompt: instructions
// of the length agent frameworks send (about 900 tokens).
var agentSystemPrompt = "You are Atlas, a careful operations agent for a small company. " +
	strings.Repeat("Follow the company's policies: verify facts with the tools before you answer, cite the record "+
		"ids you used, never invent figures, ask for confirmation before any change that spends money or deletes "+
		"data, keep answers short and structured, and say plainly when something cannot be done. ", 15)

// agentTools are the agent client's tools, as Chat Completions takes
// them.
var agentTools = func() []any {
	var out []any
	for _, name := range []string{"search_records", "read_calendar", "send_email", "update_ticket"} {
		out = append(out, map[string]any{"type": "function", "function": map[string]any{
			"name": name, "description": "Use " + name + " to work on the company's records; it returns JSON.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{
				"query": map[string]any{"type": "string", "description": "what to look for"},
				"limit": map[string]any{"type": "integer", "description": "at most this many results"},
			}, "required": []any{"query"}},
		}})
	}
	return out
}()

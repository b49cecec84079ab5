// Package tokens counts the tokens a text takes up in a model's prompt,
// offline, for the context budget (SRD §7.1). OpenAI models are counted
// exactly with their tiktoken encoding; Anthropic models, whose
// tokenizer is not public, with a calibrated estimate; anything else
// with cl100k_base, a reasonable stand-in for a BPE tokenizer of the same
// generation.
//
// The encodings ship inside the binary (github.com/pkoukk/tiktoken-go-loader
// embeds the .tiktoken files, about 7 MB): nothing is ever fetched from
// the network or read from disk. Each is loaded the first time a counter
// that uses it counts, once per process, and kept. If one cannot be
// loaded the counter falls back to one token per four characters and
// says so in its Name.
//
// The encodings' pre-tokenizers and byte-pair merge are written out in
// bpe.go and checked piece by piece against tiktoken-go, which ran the
// split patterns through a backtracking regexp engine at 2–3 MB/s.
//
// Costs, measured on an AMD EPYC (TestLoadOffline and BenchmarkCount
// report them): loading takes about 60 ms and 5 MiB of heap for
// cl100k_base, 170 ms and 9 MiB for o200k_base; counting takes 40–55 µs
// per KB with either (20–26 MB/s; 300–470 µs through tiktoken-go), and
// about 5 µs with the Anthropic estimate. Count each message once and
// keep its count rather than recounting a whole context on every change.
package tokens

import "strings"

// Counter counts the tokens of a text for one model. Count is
// deterministic and never panics; a Counter is safe for concurrent use.
type Counter interface {
	// Count returns the tokens text takes up, without any message
	// framing (see ChatOverhead). It is 0 only for the empty string.
	Count(text string) int
	// Name says how Count counts: an encoding ("o200k_base",
	// "cl100k_base"), "anthropic-estimate", or "estimate/4" (Estimate,
	// also an encoding's when it could not be loaded). Name loads the
	// encoding if Count has not yet.
	Name() string
}

// The encodings and estimates Counter.Name reports.
const (
	O200KBase         = "o200k_base"
	CL100KBase        = "cl100k_base"
	AnthropicEstimate = "anthropic-estimate"
	RuneEstimate      = "estimate/4"
)

// openAIEncodings maps OpenAI model ids to encodings: the first entry
// whose prefix the (lower-cased) id starts with wins, and an id no entry
// matches is a newer model and gets o200k_base, the encoding of every
// OpenAI model since gpt-4o. The o200k_base entries are listed for the
// reader and so that "gpt-4o"/"gpt-4.1" are not taken for "gpt-4".
// Sources: tiktoken's model.py (MODEL_TO_ENCODING,
// MODEL_PREFIX_TO_ENCODING) and tiktoken-go's copy of it.
var openAIEncodings = []struct {
	prefix   string
	encoding string
}{
	{"gpt-4o", O200KBase}, // gpt-4o, gpt-4o-mini, gpt-4o-2024-08-06…
	{"gpt-4.1", O200KBase},
	{"gpt-4.5", O200KBase},
	{"gpt-5", O200KBase},
	{"gpt-oss", O200KBase}, // o200k_harmony: o200k_base plus special tokens
	{"chatgpt-", O200KBase},
	{"o1", O200KBase},
	{"o3", O200KBase},
	{"o4", O200KBase},
	{"gpt-4", CL100KBase},         // gpt-4, gpt-4-turbo, gpt-4-0613, gpt-4-32k
	{"gpt-3.5-turbo", CL100KBase}, // and gpt-3.5-turbo-16k, -0125…
	{"gpt-35-turbo", CL100KBase},  // Azure's spelling
	{"text-embedding-3-", CL100KBase},
	{"text-embedding-ada-002", CL100KBase},
}

// OpenAIEncoding returns the tiktoken encoding of the OpenAI model
// modelID: cl100k_base for gpt-4, gpt-3.5-turbo and the text-embedding
// models, o200k_base for everything else (gpt-4o, gpt-4.1, gpt-5, o1, o3,
// o4 and models it does not know). A gateway's vendor prefix
// ("openai/gpt-4o") is ignored.
func OpenAIEncoding(modelID string) string {
	id := strings.ToLower(strings.TrimSpace(modelID))
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	for _, e := range openAIEncodings {
		if strings.HasPrefix(id, e.prefix) {
			return e.encoding
		}
	}
	return O200KBase
}

// ForModel returns the counter for modelID of provider (a provider name
// in config: "openai", "anthropic", "local"…): for "openai" the model's
// tiktoken encoding (OpenAIEncoding), for "anthropic" the calibrated
// estimate (Anthropic), and for anything else cl100k_base. It is cheap:
// the encoding is loaded, once, on the first Count.
func ForModel(provider, modelID string) Counter {
	switch strings.ToLower(provider) {
	case "openai":
		if OpenAIEncoding(modelID) == CL100KBase {
			return cl100k
		}
		return o200k
	case "anthropic":
		return Anthropic
	default:
		return cl100k
	}
}

// ChatOverhead returns the tokens a chat request of provider spends on
// framing beyond the text of its messages: perMessage for each message
// (role markers, separators) and perRequest once (the start of the reply
// the model is primed with). A context's size is the sum of its texts'
// counts, plus perMessage times the messages, plus perRequest.
//
//   - openai: 3 and 3. Each message is <|start|>{role}<|message|>…<|end|>
//     and every reply is primed with <|start|>assistant<|message|>, as
//     OpenAI's cookbook ("How to count tokens with tiktoken") counts for
//     gpt-3.5-turbo, gpt-4 and gpt-4o. A message's name, when set, costs
//     one more token. Tool definitions are not included: count their JSON.
//   - anthropic: 3 and 4, an estimate. Anthropic does not document its
//     framing; counting one short user message with the count_tokens
//     endpoint gives the text's tokens plus about 7, which these split
//     as a role marker per message and a start and reply priming per
//     request. A request with tools also carries Anthropic's tool-use
//     system prompt (several hundred tokens, listed per model in
//     Anthropic's tool-use pricing docs), which this does not include.
//   - anything else: 4 and 3, ChatML-style templates
//     (<|im_start|>{role}\n…<|im_end|>\n), the same 4 per message that
//     providers/local's estimate adds.
func ChatOverhead(provider string) (perMessage, perRequest int) {
	switch strings.ToLower(provider) {
	case "openai":
		return 3, 3
	case "anthropic":
		return 3, 4
	default:
		return 4, 3
	}
}

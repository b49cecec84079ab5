package core

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func ents(pairs ...any) []Entity {
	var out []Entity
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, Entity{Kind: pairs[i].(EntityKind), Text: pairs[i+1].(string)})
	}
	return out
}

const (
	kPin  = EntityPinned
	kPath = EntityPath
	kURL  = EntityURL
	kSym  = EntitySymbol
	kID   = EntityID
	kNum  = EntityNumber
	kQuo  = EntityQuote
	kDec  = EntityDecision
	kCon  = EntityConstraint
)

func TestExtractEntities(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text string
		want       []Entity
	}{
		{"paths", "Edit internal/core/entities.go, ~/notes.txt, /etc/hosts, ./data and config.yaml; see github.com/x/y and docs/.",
			ents(kPath, "internal/core/entities.go", kPath, "~/notes.txt", kPath, "/etc/hosts", kPath, "./data", kPath, "config.yaml",
				kPath, "github.com/x/y", kPath, "docs/")},
		{"slashes that are not paths", "and/or TCP/IP read/write km/h", nil},
		{"dates with slashes are numbers", "on 2024/05/01, 1/2 of it", ents(kNum, "2024/05/01", kNum, "1/2")},
		{"url", "See https://example.com/a/b?x=1). Or (http://x.io/p).", ents(kURL, "https://example.com/a/b?x=1", kURL, "http://x.io/p")},
		{"symbols", "Call core.FallbackSummary() or foo_bar() with maxTokens, ContextInfinity, OPENAI_API_KEY and --data-dir.",
			ents(kSym, "core.FallbackSummary()", kSym, "foo_bar()", kSym, "maxTokens", kSym, "ContextInfinity", kSym, "OPENAI_API_KEY", kSym, "--data-dir")},
		{"not symbols", "e.g. this, i.e. that, a.m. or p.m.", nil},
		{"code span", "Run `go test -race ./...` and `internal/x.go`.", ents(kSym, "go test -race ./...", kPath, "internal/x.go")},
		{"ids", "ULID 01J9ZK3X4Y5Z6A7B8C9D0E1F2G, commit 3f9a2b1c, 123e4567-e89b-12d3-a456-426614174000, JIRA-123, #42, eu-west-1, gpt-4.1-mini, v2, S3.",
			ents(kID, "01J9ZK3X4Y5Z6A7B8C9D0E1F2G", kID, "3f9a2b1c", kID, "123e4567-e89b-12d3-a456-426614174000", kID, "JIRA-123",
				kID, "#42", kID, "eu-west-1", kID, "gpt-4.1-mini", kID, "v2", kID, "S3")},
		{"numbers with units", "Timeout 30 seconds, 5 MiB, $40, 75%, 2024-05-01 at 10:30, v1.2.3, 1.5 GB, 10x, 3 retries, port 8080.",
			ents(kNum, "30 seconds", kNum, "5 MiB", kNum, "$40", kNum, "75%", kNum, "2024-05-01", kNum, "10:30", kID, "v1.2.3",
				kNum, "1.5 GB", kNum, "10x", kNum, "3 retries", kNum, "8080")},
		{"number then a symbol", "port 8080 maxTokens, 507, requests, (42) files, 1.5x", ents(kNum, "8080", kSym, "maxTokens", kNum, "507", kNum, "42", kNum, "1.5x")},
		{"single digits are not numbers", "I have 3 kids and 2 cats.", nil},
		{"quotes", `Name it "blue harbor", not “x”; she said "this is a very long quoted sentence that goes on".`,
			ents(kQuo, "blue harbor", kQuo, "x")},
		{"quoted path is a path", `open("internal/x.go")`, ents(kPath, "internal/x.go")},
		{"e-mail", "Write to ada@example.com.", ents(kSym, "ada@example.com")},
		{"decisions", "We decided to use port 8080. Let's go with SQLite! I'll use tabs. We'll see.",
			ents(kDec, "We decided to use port 8080", kNum, "8080", kDec, "Let's go with SQLite!", kDec, "I'll use tabs")},
		{"constraints", "You must never log secrets. Always run tests with -race. Should we use tabs? Don't use tabs.",
			ents(kCon, "You must never log secrets", kCon, "Always run tests with -race", kCon, "Don't use tabs")},
		{"typographic apostrophe", "Let’s go with Badger.", ents(kDec, "Let’s go with Badger")},
		{"code fence keeps paths only", "```go\nx := foo_bar(\"internal/x.go\", 8080) // must do\n```\nafter",
			ents(kPath, "internal/x.go")},
		{"decisions heading", "## Decisions\n- Badger for storage\n- Port: 8080\n## Open Items\n- We must write the migration",
			ents(kDec, "Badger for storage", kDec, "Port: 8080", kNum, "8080")},
		{"fallback labels", "- decision: use tabs\n- constraint: no more than 6 messages\n- artifact: x.go\n- user said: hi",
			ents(kDec, "use tabs", kCon, "no more than 6 messages", kNum, "6 messages", kPath, "x.go")},
		{"duplicates", "x.go and X.GO, 8080 and 8080.", ents(kPath, "x.go", kNum, "8080")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExtractEntities(tt.text); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ExtractEntities(%q) =\n%v\nwant\n%v", tt.text, got, tt.want)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"Port 8080!", " port 8080 "},
		{"  Internal/Core/X.go ", " internal core x go "},
		{"30s", " 30 s "},
		{"30 seconds", " 30 s "},
		{"the seconds", " the seconds "},
		{"1,000 and 1_000 and 1,2", " 1000 and 1000 and 1 2 "},
		{"Ünïcode—dash", " ünïcode dash "},
		{"...", " "},
	}
	for _, tt := range tests {
		if got := normalize(tt.in); got != tt.want {
			t.Errorf("normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestStem(t *testing.T) {
	t.Parallel()
	same := [][]string{
		{"store", "stored", "storing", "stores"},
		{"log", "logged", "logging", "logs"},
		{"file", "files"},
		{"dependency", "dependencies"},
		{"config", "configuration"},
		{"secret", "secrets"},
	}
	for _, group := range same {
		for _, w := range group[1:] {
			if stem(w) != stem(group[0]) {
				t.Errorf("stem(%q) = %q, stem(%q) = %q, want equal", w, stem(w), group[0], stem(group[0]))
			}
		}
	}
	if stem("bus") == stem("bu") || stem("class") != "class" {
		t.Errorf("stem(bus) = %q, stem(class) = %q", stem("bus"), stem("class"))
	}
}

func TestMissingEntities(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		summary  string
		required []Entity
		missing  []Entity
	}{
		{"case and spacing", "- The API listens on PORT   8080.", ents(kNum, "8080", kPin, "the api listens on port 8080"), nil},
		{"punctuation", "- Deploy target: EU-West-1; file `Internal/Core/X.go`", ents(kID, "eu-west-1", kPath, "internal/core/x.go"), nil},
		{"altered number", "- The API listens on port 8081.", ents(kNum, "8080", kPin, "The API listens on port 8080."),
			ents(kNum, "8080", kPin, "The API listens on port 8080.")},
		{"number inside a longer number", "- port 18080", ents(kNum, "8080"), ents(kNum, "8080")},
		{"changed path", "- code in internal/core/entity.go", ents(kPath, "internal/core/entities.go"), ents(kPath, "internal/core/entities.go")},
		{"unit spelling", "- timeout: 30s", ents(kNum, "30 seconds"), nil},
		{"changed unit", "- timeout: 30 ms", ents(kNum, "30 seconds"), ents(kNum, "30 seconds")},
		{"thousands", "- limit 1000 turns", ents(kNum, "1,000 turns"), nil},
		{"reworded decision", "## Decisions\n- Storage: SQLite, stored in ./data", ents(kDec, "We decided to store everything in SQLite under ./data"), nil},
		{"decision without its artifact", "## Decisions\n- Storage: SQLite, stored in ./db", ents(kDec, "We decided to store everything in SQLite under ./data"),
			ents(kDec, "We decided to store everything in SQLite under ./data")},
		{"decision words spread over lines", "- everything\n- SQLite\n- stored", ents(kDec, "We decided to store everything in SQLite"),
			ents(kDec, "We decided to store everything in SQLite")},
		{"constraint reworded", "- Secrets are never logged.", ents(kCon, "You must never log secrets"), nil},
		{"constraint lost its negation", "- Secrets are logged.", ents(kCon, "You must never log secrets"), ents(kCon, "You must never log secrets")},
		{"nothing required", "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MissingEntities(tt.summary, tt.required); !reflect.DeepEqual(got, tt.missing) {
				t.Errorf("MissingEntities(%q, %v) = %v, want %v", tt.summary, tt.required, got, tt.missing)
			}
		})
	}
}

func TestRequiredEntities(t *testing.T) {
	t.Parallel()
	pinned := []string{"The API listens on port 8080.", " ", "The API listens on port 8080."}
	previous := "## Facts / Constraints\n- The API listens on port 8080.\n## Decisions\n- We will use Postgres for the store\n" +
		"## Open Items\n- We must write the migration for JIRA-7\n## Key Artifacts\n- internal/store/pg.go"
	exchanges := []Exchange{
		{User: "Actually, let's use SQLite for the store instead. Keep it in ./data/ctx.db.",
			Assistant: "Done: internal/store/sqlite.go replaces internal/store/pg.go. You must never log secrets."},
	}
	got := RequiredEntities(pinned, previous, exchanges)
	want := ents(kPin, "The API listens on port 8080.",
		kID, "JIRA-7",
		kPath, "internal/store/pg.go", // still named in the answer
		kDec, "Actually, let's use SQLite for the store instead",
		kPath, "./data/ctx.db",
		kPath, "internal/store/sqlite.go",
		kCon, "You must never log secrets")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RequiredEntities =\n%v\nwant\n%v", got, want)
	}
	revisions := []struct {
		name, text string
		want       []Entity
	}{
		{"shared topic", "We decided to deploy to eu-west-1. Let's use tabs. Actually, let's deploy to us-east-2.",
			ents(kDec, "Let's use tabs", kDec, "Actually, let's deploy to us-east-2", kID, "us-east-2")},
		{"no shared topic: the decision before", "Let's use tabs. We will use Postgres. Actually, go with SQLite instead.",
			ents(kDec, "Let's use tabs", kDec, "Actually, go with SQLite instead")},
		{"constraint replaced", "Replies must be under 200 words. Actually, replies must be under 400 words instead.",
			ents(kCon, "Actually, replies must be under 400 words instead", kNum, "400 words")},
		{"a plain sentence replaces nothing", "Replies must be under 200 words. Replies may run to 400 words instead.",
			ents(kCon, "Replies must be under 200 words", kNum, "200 words", kNum, "400 words")},
	}
	for _, tt := range revisions {
		got := RequiredEntities(nil, "", []Exchange{{User: tt.text}})
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: RequiredEntities(%q) =\n%v\nwant\n%v", tt.name, tt.text, got, tt.want)
		}
	}
}

// A summary the fallback writes holds what RequiredEntities asks of the
// same inputs (pinned facts apart: the state keeps them).
func TestFallbackSummaryKeepsRequiredEntities(t *testing.T) {
	t.Parallel()
	previous := "## Facts / Constraints\n- The user's name is Ada.\n## Decisions\n- Badger for storage, in ./data\n" +
		"## Key Artifacts\n- https://example.com/spec\n- 01J9ZK3X4Y5Z6A7B8C9D0E1F2G"
	exchanges := []Exchange{
		{User: "Set the timeout to 30 seconds in config.yaml.", Assistant: "Set runtime.provider_timeout: 30s in config.yaml."},
		{User: "We must never log OPENAI_API_KEY.", Assistant: "Understood; I will keep OPENAI_API_KEY out of logs."},
	}
	got := FallbackSummary(previous, exchanges)
	if miss := MissingEntities(got, RequiredEntities(nil, previous, exchanges)); len(miss) > 0 {
		t.Errorf("FallbackSummary lost %v:\n%s", miss, got)
	}
	if !strings.Contains(got, "## Facts / Constraints\n- The user's name is Ada.") {
		t.Errorf("FallbackSummary dropped a model-written fact:\n%s", got)
	}
	// Folding again changes nothing but the exchanges' lines.
	again := FallbackSummary(got, nil)
	if miss := MissingEntities(again, RequiredEntities(nil, got, nil)); len(miss) > 0 {
		t.Errorf("FallbackSummary of its own output lost %v:\n%s", miss, again)
	}
}

func TestEntityKindString(t *testing.T) {
	t.Parallel()
	if got := EntityPinned.String(); got != "pinned fact" {
		t.Errorf("EntityPinned.String() = %q", got)
	}
	if got := EntityKind(99).String(); got != "entity(99)" {
		t.Errorf("EntityKind(99).String() = %q", got)
	}
	for k := EntityPinned; k <= EntityConstraint; k++ {
		if want := k >= EntityPath && k <= EntityQuote; k.IsArtifact() != want {
			t.Errorf("%v.IsArtifact() = %v, want %v", k, !want, want)
		}
	}
}

// benchSummary is a fallback summary grown over rounds of exchanges
// full of artifacts, near FallbackSummaryMaxBytes.
func benchSummary() (string, []Exchange) {
	summary := ""
	var ex []Exchange
	for i := range 60 {
		ex = []Exchange{{
			User: fmt.Sprintf("We decided to keep the cache in internal/cache/c%d.go with a %d MiB limit. "+
				"Also, what about the retry policy for service-%d?", i, 10+i, i),
			Assistant: fmt.Sprintf("Noted: c%d.go, %d MiB. The retry policy of service-%d must back off from %d ms; "+
				"see https://example.com/retry/%d for details.", i, 10+i, i, 100+i, i),
		}}
		summary = FallbackSummary(summary, ex)
	}
	return summary, ex
}

func BenchmarkRequiredEntities(b *testing.B) {
	previous, ex := benchSummary()
	pinned := []string{"The API listens on port 8080."}
	b.ReportAllocs()
	b.ReportMetric(float64(len(previous)), "summary-bytes")
	for b.Loop() {
		MissingEntities(previous, RequiredEntities(pinned, previous, ex))
	}
}

func BenchmarkFallbackSummary(b *testing.B) {
	previous, ex := benchSummary()
	b.ReportAllocs()
	for b.Loop() {
		FallbackSummary(previous, ex)
	}
}

// localExchange is turn n of a branch as `ctxinf bench turns` drives it:
// a short user message and the local provider's report of its context.
func localExchange(n int) Exchange {
	user := fmt.Sprintf("turn %d of a load test", n)
	return Exchange{User: user, Assistant: fmt.Sprintf("[local] I received your message (6 words): %q. "+
		"Context: 0 pinned facts, summary of %d tokens, %d window messages, 2 pending turns, 0 retrieved chunks. "+
		"Pending turns: #1 \"turn %d of a load test\" #2 \"turn %d of a load test\".", user, 40+9*n, 2*min(n, 4), n+1, n+2)}
}

// BenchmarkFallbackSummaryLocal folds the 20 turns of a branch of
// `ctxinf bench turns` one at a time, as its librarian does: the time
// and allocations per op are a branch's.
func BenchmarkFallbackSummaryLocal(b *testing.B) {
	b.ReportAllocs()
	var summary string
	for b.Loop() {
		summary = ""
		for n := range 20 {
			summary = FallbackSummary(summary, []Exchange{localExchange(n)})
		}
	}
	b.ReportMetric(float64(len(summary)), "summary-bytes")
}

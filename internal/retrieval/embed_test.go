package retrieval

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// fixedEmbedder is an Embedder with a given name and dimension.
type fixedEmbedder struct {
	name string
	dim  int
}

func (f fixedEmbedder) Name() string { return f.name }
func (f fixedEmbedder) Dim() int     { return f.dim }
func (f fixedEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, nil
}

func TestNamespace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		dim  int
		want string
	}{
		{"hash-256", 256, "hash-256"},
		{"glove-100d", 100, "glove-100d"},
		{"glove-100d", 10, "glove-100d-10"},
		{"openai/text-embedding-3-small-1536", 1536, "openai_text-embedding-3-small-1536"},
		{"ollama/Nomic Embed", 768, "ollama_nomic_embed-768"},
		{"", 4, "unnamed-4"},
	} {
		if got := Namespace(fixedEmbedder{tc.name, tc.dim}); got != tc.want {
			t.Errorf("Namespace(%q, %d) = %q, want %q", tc.name, tc.dim, got, tc.want)
		}
	}
}

func TestL2Normalize(t *testing.T) {
	t.Parallel()
	v := []float32{3, 4}
	if !L2Normalize(v) || v[0] != 0.6 || v[1] != 0.8 {
		t.Errorf("L2Normalize({3,4}) = %v, want {0.6,0.8}, true", v)
	}
	for _, v := range [][]float32{{0, 0}, {}, {float32(math.NaN()), 1}, {float32(math.Inf(1)), 0}} {
		before := slices.Clone(v)
		if L2Normalize(v) {
			t.Errorf("L2Normalize(%v) = true, want false", before)
		}
		if !slices.Equal(v, before) && !math.IsNaN(float64(before[0])) {
			t.Errorf("L2Normalize(%v) changed it to %v", before, v)
		}
	}
}

func TestForEachWord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"Hello, World!", "hello world"},
		{"state-of-the-art e-mail", "state-of-the-art e-mail"},
		{"Don’t stop: it's node.js v1.2 -- end.", "don't stop it's node.js v1.2 end"},
		{"max_words=10 'quoted' -x y-", "max_words 10 quoted x y"},
		{"Ünïcode ÉCOLE naïve 東京 2024", "ünïcode école naïve 東京 2024"},
		{"", ""},
		{"?!", ""},
	} {
		var got []string
		forEachWord(tc.in, nil, func(w []byte) { got = append(got, string(w)) })
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("forEachWord(%q) = %q, want %q", tc.in, s, tc.want)
		}
	}
}

// embedOne embeds one text or fails the test.
func embedOne(t testing.TB, e Embedder, text string) []float32 {
	t.Helper()
	vs, err := e.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatalf("%s: Embed(%q): %v", e.Name(), text, err)
	}
	if len(vs) != 1 || len(vs[0]) != e.Dim() {
		t.Fatalf("%s: Embed(%q) = %d vectors, first of len %d, want 1 of %d", e.Name(), text, len(vs), len(vs[0]), e.Dim())
	}
	return vs[0]
}

// checkEmbedder checks what every Embedder of this package promises:
// one unit vector per text, the same for the same text whatever the
// batch, never zero, and a cancelled context is an error.
func checkEmbedder(t *testing.T, e Embedder) {
	t.Helper()
	texts := []string{
		"The cat sat on the mat.", "", "   ", "?!", "the of and", "naïve 東京 caf\u00e9",
		strings.Repeat("a long text about deployments and databases ", 200),
		"The cat sat on the mat.",
	}
	vs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatalf("%s: Embed: %v", e.Name(), err)
	}
	if len(vs) != len(texts) {
		t.Fatalf("%s: %d vectors for %d texts", e.Name(), len(vs), len(texts))
	}
	for i, v := range vs {
		if len(v) != e.Dim() {
			t.Errorf("%s: vector %d has %d entries, want %d", e.Name(), i, len(v), e.Dim())
		}
		if n := Dot(v, v); math.Abs(float64(n)-1) > 1e-4 {
			t.Errorf("%s: Embed(%q) has squared norm %v, want 1", e.Name(), texts[i], n)
		}
		if one := embedOne(t, e, texts[i]); !slices.Equal(one, v) {
			t.Errorf("%s: Embed(%q) alone differs from in a batch", e.Name(), texts[i])
		}
	}
	if !slices.Equal(vs[0], vs[len(vs)-1]) {
		t.Errorf("%s: the same text gave two vectors", e.Name())
	}
	if slices.Equal(vs[1], vs[3]) {
		t.Errorf("%s: %q and %q gave the same vector", e.Name(), texts[1], texts[3])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, texts); err != context.Canceled {
		t.Errorf("%s: Embed on a cancelled context = %v, want context.Canceled", e.Name(), err)
	}
}

// checkCloser checks that each query is closer to its paraphrase than to
// any of the unrelated texts.
func checkCloser(t *testing.T, e Embedder, cases []similarCase) {
	t.Helper()
	for _, c := range cases {
		q := embedOne(t, e, c.query)
		near := Dot(q, embedOne(t, e, c.near))
		for _, far := range c.far {
			if f := Dot(q, embedOne(t, e, far)); f >= near {
				t.Errorf("%s: cos(%q, %q) = %.3f, not above cos(…, %q) = %.3f", e.Name(), c.query, c.near, near, far, f)
			}
		}
	}
}

type similarCase struct {
	query, near string
	far         []string
}

// benchTexts returns n short English texts of 8 to 20 words, the same
// every run.
func benchTexts(n int) []string {
	words := strings.Fields(`the of and to a in is it you that he was for on are with as I his they be at one
have this from or had by hot word but what some we can out other were all there when up use your how said an
each she which do their time if will way about many then them write would like so these her long make thing see
him two has look more day could go come did number sound no most people my over know water than call first who
may down side been now find any new work part take get place made live where after back little only round man
year came show every good me give our under name very through just form sentence great think say help low line
differ turn cause much mean before move right boy old too same tell does set three want air well also play small
end put home read hand port large spell add even land here must big high such follow act why ask men change went
light kind off need house picture try us again animal point mother world near build self earth father deploy
server database migration timeout kubernetes cluster Caroline Melanie painting support group adoption beach`)
	rng := rand.New(rand.NewPCG(1, 2))
	texts := make([]string, n)
	for i := range texts {
		k := 8 + rng.IntN(13)
		var b strings.Builder
		for j := range k {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		b.WriteByte('.')
		texts[i] = b.String()
	}
	return texts
}

// benchEmbed measures e.Embed on batches of 64 short texts and reports
// texts/s.
func benchEmbed(b *testing.B, e Embedder) {
	texts := benchTexts(1024)
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		i := (n * 64) % len(texts)
		if _, err := e.Embed(ctx, texts[i:i+64]); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n*64)/b.Elapsed().Seconds(), "texts/s")
}

package retrieval

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"testing"
)

var similarEnglish = []similarCase{
	{
		query: "How do I deploy the service to Kubernetes?",
		near:  "Deploying services on Kubernetes clusters",
		far:   []string{"My cat likes to sleep on the sofa", "The recipe needs two eggs and flour", "How do I get to the station?"},
	},
	{
		query: "the database migration failed with a timeout",
		near:  "database migrations time out and fail",
		far:   []string{"we went hiking in the mountains", "quarterly revenue grew by ten percent"},
	},
	{
		query: "Caroline went to the LGBTQ support group",
		near:  "Caroline talked about her support group",
		far:   []string{"Melanie painted a sunrise over the lake", "the support ticket was closed"},
	},
}

func TestHashEmbedderContract(t *testing.T) {
	t.Parallel()
	for _, h := range []HashEmbedder{{}, {Dims: 64}, {Dims: 256, NoTrigrams: true}, {Dims: 100, Bigrams: true}} {
		t.Run(h.Name(), func(t *testing.T) { checkEmbedder(t, h) })
	}
}

func TestHashEmbedderName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		h    HashEmbedder
		name string
		dim  int
	}{
		{HashEmbedder{}, fmt.Sprintf("hash-%d", DefaultHashDims), DefaultHashDims},
		{HashEmbedder{Dims: 256}, "hash-256", 256},
		{HashEmbedder{Dims: 256, NoTrigrams: true, Bigrams: true}, "hash-256-notri-bi", 256},
	} {
		if tc.h.Name() != tc.name || tc.h.Dim() != tc.dim {
			t.Errorf("%+v: Name, Dim = %q, %d, want %q, %d", tc.h, tc.h.Name(), tc.h.Dim(), tc.name, tc.dim)
		}
	}
}

func TestHashEmbedderSimilar(t *testing.T) {
	t.Parallel()
	for _, h := range []HashEmbedder{{}, {Dims: 256}} {
		checkCloser(t, h, similarEnglish)
	}
	// Trigrams bring inflected forms together.
	h := HashEmbedder{Dims: 512}
	noTri := HashEmbedder{Dims: 512, NoTrigrams: true}
	a, b := "embedding vectors", "embeddings vector"
	if with, without := Dot(embedOne(t, h, a), embedOne(t, h, b)), Dot(embedOne(t, noTri, a), embedOne(t, noTri, b)); with < 0.5 || with <= without {
		t.Errorf("cos(%q, %q) = %.3f with trigrams, %.3f without: want above 0.5 and higher with them", a, b, with, without)
	}
}

func TestHashEmbedderFeatures(t *testing.T) {
	t.Parallel()
	h := HashEmbedder{Dims: 1024, NoTrigrams: true}
	for _, tc := range []struct {
		a, b  string
		equal bool
	}{
		{"Hello World", "hello, world!", true}, // case and punctuation
		{"the cat", "cat", true},               // stop words out
		{"cat cat cat", "cat", true},           // one feature, normalised
		{"cat cat dog", "cat dog", false},      // tf counts, sublinearly
		{"the of and", "the", false},           // only stop words: all kept
		{"the of and", "and of the", true},     // a bag of words
		{"e-mail", "e mail", false},            // the compound is a feature too
		{"", "?!", false},                      // raw bytes, different
		{"dog cat", "cat dog", true},           // order does not matter
		{"naïve café", "NAÏVE CAFÉ", true},     // Unicode lower case
		{"don't panic", "don’t panic", true},   // apostrophes are one
		{"state-of-the-art", "state of the art", false},
	} {
		va, vb := embedOne(t, h, tc.a), embedOne(t, h, tc.b)
		if got := slices.Equal(va, vb); got != tc.equal {
			t.Errorf("Embed(%q) == Embed(%q) is %v, want %v", tc.a, tc.b, got, tc.equal)
		}
	}
	// Sublinear tf: "cat" twice weighs 1+ln 2 against dog's 1.
	v := embedOne(t, h, "cat cat dog")
	cat, dog := embedOne(t, h, "cat"), embedOne(t, h, "dog")
	ratio := float64(Dot(v, cat) / Dot(v, dog))
	if math.Abs(ratio-(1+math.Ln2)) > 0.05 {
		t.Errorf("cat/dog weight in %q = %.3f, want 1+ln 2 = %.3f", "cat cat dog", ratio, 1+math.Ln2)
	}
}

// TestHashEmbedderStable pins the vectors: they are stored in indexes,
// so a change of hashing must come with a new Name.
func TestHashEmbedderStable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		h    HashEmbedder
		text string
		crc  uint32
	}{
		{HashEmbedder{Dims: 256}, "The quick brown fox jumps over the lazy dog.", 0x36c76aaa},
		{HashEmbedder{Dims: 64, Bigrams: true}, "state-of-the-art e-mail, don't panic!", 0x9ce9b4d7},
		{HashEmbedder{Dims: 32}, "", 0x37250584},
	} {
		v := embedOne(t, tc.h, tc.text)
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		got := crc32.ChecksumIEEE(b)
		if got != tc.crc {
			t.Errorf("%s: Embed(%q) has CRC %#08x, want %#08x: the vectors changed, so must the Name", tc.h.Name(), tc.text, got, tc.crc)
		}
	}
}

func BenchmarkHashEmbed(b *testing.B) {
	for _, h := range []HashEmbedder{{Dims: 256}, {Dims: 512}, {Dims: 512, NoTrigrams: true}, {Dims: 1024}} {
		b.Run("model="+h.Name(), func(b *testing.B) { benchEmbed(b, h) })
	}
}

// BenchmarkHashEmbedQuery embeds one text per call, as a turn's search
// embeds its query: the scratch of earlier calls is reused.
func BenchmarkHashEmbedQuery(b *testing.B) {
	text := `[local] I received your message (6 words): "turn 7 of a load test". Context: 0 pinned facts, ` +
		`summary of 103 tokens, 8 window messages, 2 pending turns, 0 retrieved chunks.`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (HashEmbedder{}).Embed(context.Background(), []string{text}); err != nil {
			b.Fatal(err)
		}
	}
}

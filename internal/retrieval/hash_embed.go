package retrieval

import (
	"context"
	"math"
	"slices"
	"strconv"
	"sync"
)

// DefaultHashDims is the dimension of a HashEmbedder whose Dims is 0.
// More buckets mean fewer collisions: recall@10 on LoCoMo dev (turns as
// chunks, cosine top 10) is 0.451 with 256, 0.496 with 512 and 0.534 with
// 1024, at 2 and 4 times the index's size and search time.
const DefaultHashDims = 512

// HashEmbedder embeds a text by signed feature hashing (the "hashing
// trick"): each feature of the text is hashed to one of Dims buckets and
// adds ±weight there, the sign taken from another bit of the hash, so
// that collisions cancel out on average. It needs no files, is
// deterministic across runs, machines and Go versions, and is fast.
//
// The features of a text are its words (forEachWord: lower-cased runs of
// letters and digits; "e-mail" gives "e-mail" and its parts of two bytes
// or more, "mail"), English stop words left out, each with weight 1,
// and, unless NoTrigrams, the character trigrams of each word with its boundaries ("<cat>" gives
// "<ca", "cat", "at>"), together weighing 1.5 per word (in L2), so that
// "embedding" and "embeddings" come close. Bigrams adds pairs of
// consecutive words. A feature seen n times weighs 1+ln(n) times its
// weight (sublinear tf). The vector is L2-normalised.
//
// A text with only stop words is embedded from them; a text with no word
// at all ("", "?!") is the one-hot vector of the hash of its bytes, so the
// result is never zero and is the same for the same text.
//
// The zero value is ready to use (DefaultHashDims, words and trigrams;
// at 256 dims recall@10 on LoCoMo dev is 0.451, 0.396 without trigrams
// and 0.442 with bigrams). A HashEmbedder is safe for concurrent use; do not change its fields
// while it is in use.
type HashEmbedder struct {
	// Dims is the number of buckets, the dimension of the vectors; 0
	// means DefaultHashDims. (It cannot be named Dim: that is the
	// Embedder method.)
	Dims int
	// NoTrigrams leaves character trigrams out.
	NoTrigrams bool
	// Bigrams adds consecutive word pairs with weight 0.5.
	Bigrams bool
}

// trigramWeight is the total weight of one word's character trigrams,
// shared among them, and bigramWeight the weight of a word pair.
const (
	trigramWeight = 1.5
	bigramWeight  = 0.5
)

var _ Embedder = HashEmbedder{}

// Name returns "hash-<dims>", followed by "-notri" without trigrams and
// "-bi" with bigrams, as those change the vectors.
func (h HashEmbedder) Name() string {
	s := "hash-" + strconv.Itoa(h.Dim())
	if h.NoTrigrams {
		s += "-notri"
	}
	if h.Bigrams {
		s += "-bi"
	}
	return s
}

// Dim returns Dims, or DefaultHashDims when it is 0 or less.
func (h HashEmbedder) Dim() int {
	if h.Dims <= 0 {
		return DefaultHashDims
	}
	return h.Dims
}

// Embed returns the hashed vector of each text. It fails only when ctx is
// done (checked every 64 texts).
func (h HashEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	dim := h.Dim()
	out := make([][]float32, len(texts))
	flat := make([]float32, len(texts)*dim)
	sc := scratches.Get().(*hashScratch)
	defer func() {
		if cap(sc.feats) <= maxScratchFeatures {
			scratches.Put(sc)
		}
	}()
	for i, t := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		v := flat[i*dim : (i+1)*dim : (i+1)*dim]
		h.embed(t, v, sc)
		out[i] = v
	}
	return out, nil
}

// scratches keeps the scratch of Embed calls for the next: a turn embeds
// its query and its chunks in calls of their own, and growing each
// call's features from nothing was about 3 % of the bytes a bench turns
// load allocated. maxScratchFeatures bounds the scratches kept.
var scratches = sync.Pool{New: func() any { return new(hashScratch) }}

const maxScratchFeatures = 1 << 16

// hashScratch is reused between the texts of Embed calls.
type hashScratch struct {
	word  []byte
	feats []hashFeature
	prev  uint64 // hash of the previous content word, for bigrams
	tri   []byte
}

// hashFeature is one occurrence of a feature: its hash and weight.
type hashFeature struct {
	h uint64
	w float32
}

// Seeds keep the feature kinds apart: the word "cat" and the trigram
// "cat" hash differently.
const (
	seedWord    = 0x9e3779b97f4a7c15
	seedTrigram = 0xc2b2ae3d27d4eb4f
	seedBigram  = 0x165667b19e3779f9
	seedRaw     = 0x27d4eb2f165667c5
)

// embed writes the unit vector of text into v, which is zero and Dim()
// long.
func (h HashEmbedder) embed(text string, v []float32, sc *hashScratch) {
	sc.feats = sc.feats[:0]
	h.features(text, sc, false)
	if len(sc.feats) == 0 {
		h.features(text, sc, true)
	}
	if len(sc.feats) == 0 {
		// No word at all: the text's bytes as one feature.
		sc.feats = append(sc.feats, hashFeature{h: hashBytes(seedRaw, []byte(text)), w: 1})
	}
	addHashed(v, sc.feats)
	if !L2Normalize(v) {
		// Every feature cancelled out (colliding opposite signs): fall
		// back to the first feature alone.
		clear(v)
		addHashed(v, sc.feats[:1])
		L2Normalize(v)
	}
}

// features appends the features of text to sc.feats, stop words kept
// only when withStop.
func (h HashEmbedder) features(text string, sc *hashScratch, withStop bool) {
	sc.prev = 0
	sc.word = forEachWord(text, sc.word, func(w []byte) {
		if !withStop && isStopWord(w) {
			return
		}
		hw := hashBytes(seedWord, w)
		sc.feats = append(sc.feats, hashFeature{h: hw, w: 1})
		if h.Bigrams {
			if sc.prev != 0 {
				sc.feats = append(sc.feats, hashFeature{h: mix64(sc.prev*31 ^ hw ^ seedBigram), w: bigramWeight})
			}
			sc.prev = hw
		}
		if hasConnector(w) {
			wordParts(w, func(p []byte) {
				if len(p) > 1 && (withStop || !isStopWord(p)) {
					sc.feats = append(sc.feats, hashFeature{h: hashBytes(seedWord, p), w: 1})
				}
			})
		}
		if !h.NoTrigrams {
			h.trigrams(w, sc)
		}
	})
}

// trigrams appends the character trigrams of each part of w, with its
// boundaries marked, sharing trigramWeight.
func (h HashEmbedder) trigrams(w []byte, sc *hashScratch) {
	wordParts(w, func(p []byte) {
		sc.tri = append(append(append(sc.tri[:0], '<'), p...), '>')
		n := len(sc.tri) - 2 // bytes: close enough to runes for a weight
		if n < 1 {
			return
		}
		wt := float32(trigramWeight / math.Sqrt(float64(n)))
		for i := 0; i+3 <= len(sc.tri); i++ {
			sc.feats = append(sc.feats, hashFeature{h: hashBytes(seedTrigram, sc.tri[i:i+3]), w: wt})
		}
	})
}

// addHashed adds the features to v with sublinear tf: equal hashes are
// one feature seen n times, weighing w·(1+ln n).
func addHashed(v []float32, feats []hashFeature) {
	slices.SortFunc(feats, func(a, b hashFeature) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return 0
	})
	dim := uint64(len(v))
	for i := 0; i < len(feats); {
		j := i + 1
		for j < len(feats) && feats[j].h == feats[i].h {
			j++
		}
		w := feats[i].w
		if n := j - i; n > 1 {
			w *= 1 + float32(math.Log(float64(n)))
		}
		hv := feats[i].h
		if hv>>63 != 0 {
			w = -w
		}
		v[(hv&(1<<63-1))%dim] += w
		i = j
	}
}

// hashBytes is 64-bit FNV-1a of b, started from seed, then mixed
// (mix64) so that every bit depends on every byte.
func hashBytes(seed uint64, b []byte) uint64 {
	const prime = 0x100000001b3
	h := uint64(0xcbf29ce484222325) ^ seed
	for _, c := range b {
		h ^= uint64(c)
		h *= prime
	}
	return mix64(h)
}

// mix64 is MurmurHash3's 64-bit finalizer.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/contextinfinity/ctxinf/messages"
)

// MaxVectorDims bounds a stored vector's dimension.
const MaxVectorDims = 8192

// VectorRow is a chunk's embedding in a namespace (the embedder's name
// and dimension).
type VectorRow struct {
	Namespace string
	Chunk     messages.ChunkID
	Vector    []float32
}

// ChunkDoc is a chunk's entry in a branch's retrieval partition: enough
// to rebuild the branch's full-text index without reading chunk rows.
type ChunkDoc struct {
	Chunk     messages.ChunkID
	Seq       uint64
	Terms     map[string]float32
	TermCount float32
	Meta      DocMeta
}

// DocMeta is what a partition entry holds of its chunk besides its
// terms: who said it and when, for a search to filter and boost by
// without reading chunk rows. Entries written before it was kept have
// none (the zero DocMeta).
type DocMeta struct {
	Time    int64  // when it was said (ChunkRow.Said), Unix milliseconds; 0 when not known
	Role    string // ChunkRow.Role: "user", "assistant" or "tool"; "" when not known
	Speaker string // ChunkRow.Speaker
}

// MetaOf is c's DocMeta.
func MetaOf(c ChunkRow) DocMeta {
	return DocMeta{Time: c.Said().UnixMilli(), Role: c.Role(), Speaker: c.Speaker}
}

// docRoles are the roles' codes in an encoded entry (0: none).
var docRoles = []string{"", "user", "assistant", "tool"}

// TermUpdate adds weighted terms to a chunk's entry in a branch's
// partition: the text of a turn that came after it (its neighbour
// context). An entry the branch does not have is left alone.
type TermUpdate struct {
	Branch messages.BranchID
	Seq    uint64
	Chunk  messages.ChunkID
	Add    map[string]float32
	Count  float32 // added to the entry's term count
}

// EncodeDoc encodes a partition entry: the term count (float32), the
// number of distinct terms (uvarint), then each term (uvarint length,
// bytes) and its weight (float32), in term order; then, unless meta is
// zero, its metadata: the byte 1, the time (varint), the role's code
// (uvarint: 0 none, 1 user, 2 assistant, 3 tool) and the speaker
// (uvarint length, bytes). Floats are little endian. An entry without
// metadata is laid out as before it was kept.
func EncodeDoc(terms map[string]float32, n float32, meta DocMeta) []byte {
	keys := make([]string, 0, len(terms))
	for t := range terms {
		keys = append(keys, t)
	}
	slices.Sort(keys)
	b := binary.LittleEndian.AppendUint32(nil, math.Float32bits(n))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, t := range keys {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(terms[t]))
	}
	if meta == (DocMeta{}) {
		return b
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, meta.Time)
	b = binary.AppendUvarint(b, uint64(max(slices.Index(docRoles, meta.Role), 0)))
	b = binary.AppendUvarint(b, uint64(len(meta.Speaker)))
	return append(b, meta.Speaker...)
}

var errBadDoc = errors.New("bad partition entry")

// DecodeDoc decodes a partition entry EncodeDoc laid out: its terms,
// term count and metadata.
func DecodeDoc(b []byte) (map[string]float32, float32, DocMeta, error) {
	terms, count, rest, err := decodeTerms(b)
	if err != nil || len(rest) == 0 {
		return terms, count, DocMeta{}, err
	}
	var meta DocMeta
	if rest[0] != 1 {
		return nil, 0, meta, errBadDoc
	}
	rest = rest[1:]
	t, n := binary.Varint(rest)
	if n <= 0 {
		return nil, 0, meta, errBadDoc
	}
	meta.Time, rest = t, rest[n:]
	role, n := binary.Uvarint(rest)
	if n <= 0 || role >= uint64(len(docRoles)) {
		return nil, 0, meta, errBadDoc
	}
	meta.Role, rest = docRoles[role], rest[n:]
	l, n := binary.Uvarint(rest)
	if n <= 0 || l != uint64(len(rest)-n) {
		return nil, 0, meta, errBadDoc
	}
	meta.Speaker = string(rest[n:])
	return terms, count, meta, nil
}

// decodeTerms decodes the terms and term count of an entry, and returns
// what follows them.
func decodeTerms(b []byte) (map[string]float32, float32, []byte, error) {
	f32 := func() (float32, error) {
		if len(b) < 4 {
			return 0, errBadDoc
		}
		v := math.Float32frombits(binary.LittleEndian.Uint32(b))
		b = b[4:]
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < 0 {
			return 0, errBadDoc
		}
		return v, nil
	}
	count, err := f32()
	if err != nil {
		return nil, 0, nil, err
	}
	distinct, n := binary.Uvarint(b)
	if n <= 0 || distinct > uint64(len(b)) {
		return nil, 0, nil, errBadDoc
	}
	b = b[n:]
	terms := make(map[string]float32, distinct)
	for range distinct {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, 0, nil, errBadDoc
		}
		t := string(b[n : n+int(l)])
		b = b[n+int(l):]
		w, err := f32()
		if err != nil {
			return nil, 0, nil, err
		}
		terms[t] = w
	}
	return terms, count, b, nil
}

// DecodeVector decodes a stored vector (float32 little endian) of chunk.
func DecodeVector(b []byte, chunk messages.ChunkID) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%w: vector of chunk %s: %d bytes", ErrCorrupt, chunk, len(b))
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

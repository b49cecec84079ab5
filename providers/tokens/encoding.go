package tokens

import (
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// The counters of the two encodings, shared by every caller.
var (
	o200k  = &encoding{name: O200KBase}
	cl100k = &encoding{name: CL100KBase}
)

// encoding is a Counter for one tiktoken encoding: its byte-pair ranks,
// read on first use from the files embedded by tiktoken-go-loader, and
// its pre-tokenizer (bpe.go).
type encoding struct {
	name  string
	once  sync.Once
	piece pieceFunc
	ranks map[string]int // nil when loading failed
	err   error
}

// rankFiles are the encodings' rank files as tiktoken-go-loader knows
// them (it reads them from its embedded copies, never from the network),
// and pieceFuncs their pre-tokenizers.
var (
	rankFiles = map[string]string{
		O200KBase:  "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
		CL100KBase: "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
	}
	pieceFuncs = map[string]pieceFunc{O200KBase: o200kPiece, CL100KBase: cl100kPiece}
)

// load loads the encoding the first time it is called and is a no-op
// after that. A load that fails (or panics) leaves ranks nil.
func (e *encoding) load() {
	e.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				e.ranks, e.err = nil, fmt.Errorf("tokens: load %s: panic: %v", e.name, r)
			}
		}()
		file, piece := rankFiles[e.name], pieceFuncs[e.name]
		if piece == nil {
			e.err = fmt.Errorf("tokens: no encoding %q", e.name)
			return
		}
		ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(file)
		if err != nil {
			e.err = fmt.Errorf("tokens: load %s: %w", e.name, err)
			return
		}
		e.piece, e.ranks = piece, ranks
	})
}

// Name returns the encoding's name, or RuneEstimate if it could not be
// loaded.
func (e *encoding) Name() string {
	e.load()
	if e.ranks == nil {
		return RuneEstimate
	}
	return e.name
}

// Count returns the number of tokens of text in the encoding, special
// tokens such as <|endoftext|> being counted as the plain text they are.
// If the encoding could not be loaded it returns Estimate.Count(text).
//
// Text is split so that no piece holds a run of more than maxRun bytes of
// one kind (letters, digits, spaces, other symbols): byte-pair merging is
// quadratic in the length of a pre-token, and a run of 100k letters or
// spaces in a tool's output would otherwise take minutes. A cut costs at
// most a token or two of accuracy on such runs and never happens in prose
// or code.
func (e *encoding) Count(text string) (n int) {
	if text == "" {
		return 0
	}
	e.load()
	if e.ranks == nil {
		return Estimate.Count(text)
	}
	defer func() {
		if r := recover(); r != nil {
			n = Estimate.Count(text)
		}
	}()
	for text != "" {
		cut := nextCut(text)
		n += countPieces(text[:cut], e.piece, e.ranks)
		text = text[cut:]
	}
	return n
}

// maxRun is the longest run of runes of one class Count encodes whole.
const maxRun = 256

// runeClass is the class of r for finding long runs of one kind, roughly
// the classes the encodings' pre-tokenizers split on.
func runeClass(r rune) int {
	switch {
	case unicode.IsLetter(r) || unicode.IsMark(r):
		return 1
	case unicode.IsNumber(r):
		return 2
	case unicode.IsSpace(r):
		return 3
	default:
		return 4
	}
}

// nextCut returns how much of text Count encodes in one piece: all of
// it, or up to a cut in the first run of one class that reaches maxRun
// bytes.
func nextCut(text string) int {
	class, start := 0, 0
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if c := runeClass(r); c != class {
			class, start = c, i
		} else if i+size-start > maxRun {
			return i
		}
		i += size
	}
	return len(text)
}

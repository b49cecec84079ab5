package server

import (
	"encoding/base64"
	"encoding/binary"
	"net/http"

	"github.com/contextinfinity/ctxinf/api"
)

// A list route's cursor is opaque to clients: base64url of the listing's
// mark (a byte), its order (a byte: 0 oldest first, 1 newest first) and
// the key of the last row of the page before (a 16-byte id, a pin's
// 8-byte id, or a pending turn's 8-byte seq).
const (
	listSessions byte = 's'
	listBranches byte = 'b'
	listPins     byte = 'p'
	listInspect  byte = 'i'
	listPending  byte = 't'
	listModels   byte = 'm'
)

// maxVarKey bounds the key of a listing whose keys vary in length (a
// model's name): pageOf's keyLen anyKeyLen.
const (
	anyKeyLen = -1
	maxVarKey = 256
)

// page is a list request's paging: how many rows, and after which.
type page struct {
	limit  int
	after  []byte // the key the cursor names; nil on the first page
	newest bool
}

// pageOf reads r's ?limit, ?cursor and (when ordered) ?order for the
// listing marked list, whose keys are keyLen bytes (anyKeyLen: 1 to
// maxVarKey); a bad value is refused naming its parameter and what it
// wants.
func pageOf(r *http.Request, list byte, keyLen int, ordered bool) (page, error) {
	var p page
	limit, err := queryInt(r, "limit", api.DefaultListLimit, 1, api.MaxListLimit)
	if err != nil {
		return p, err
	}
	p.limit = limit
	q := r.URL.Query()
	order := q.Get("order")
	switch {
	case order == "" || ordered && order == "oldest":
	case ordered && order == "newest":
		p.newest = true
	case ordered:
		return p, invalid("order: %q, want oldest (the default) or newest", order)
	default:
		return p, invalid("order: this listing has one order, by id")
	}
	c := q.Get("cursor")
	if c == "" {
		return p, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	badLen := len(b) != 2+keyLen
	if keyLen == anyKeyLen {
		badLen = len(b) < 3 || len(b) > 2+maxVarKey
	}
	if err != nil || badLen || b[0] != list || b[1] > 1 {
		return p, invalid("cursor: %q is not a cursor of this listing (pass the next of its previous page)", c)
	}
	if newest := b[1] == 1; order != "" && newest != p.newest {
		return p, invalid("order: %q, but the cursor is of a page in the other order", order)
	} else {
		p.newest = newest
	}
	p.after = b[2:]
	return p, nil
}

// next is the cursor of the page after the one ending at key.
func (p page) next(list byte, key []byte) string {
	b := []byte{list, 0}
	if p.newest {
		b[1] = 1
	}
	return base64.RawURLEncoding.EncodeToString(append(b, key...))
}

// pinKey is a pin's id as a cursor's key.
func pinKey(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// An idempotency key is stored with what it names, found again after the
// store is reopened, never made to name something else, and refused when
// malformed, with nothing of its Tx written.
func testIdempotencyKeys(t *testing.T, d DB, reopen func() DB) {
	now := time.UnixMilli(1_700_000_000_000)
	b := messages.NewID[messages.BranchID](now)
	turn := messages.NewID[messages.TurnID](now)
	row := persistence.IdempotencyRow{Scope: persistence.ScopeTurn, Owner: b, Key: "retry-1", Hash: "h1", Turn: turn, Created: now.UTC()}
	if _, err := d.IdempotencyKey(bg, persistence.ScopeTurn, b, "retry-1"); !errors.Is(err, persistence.ErrKeyNotFound) {
		t.Fatalf("IdempotencyKey before = %v, want ErrKeyNotFound", err)
	}
	if _, err := d.Commit(bg, &persistence.Tx{Keys: []persistence.IdempotencyRow{row}}); err != nil {
		t.Fatal(err)
	}
	// The same row again is nothing; another turn under the key is refused.
	if _, err := d.Commit(bg, &persistence.Tx{Keys: []persistence.IdempotencyRow{row}}); err != nil {
		t.Fatalf("Commit(same key row again) = %v, want nil", err)
	}
	other := row
	other.Turn = messages.NewID[messages.TurnID](now)
	if _, err := d.Commit(bg, &persistence.Tx{Keys: []persistence.IdempotencyRow{other}}); !errors.Is(err, persistence.ErrDuplicate) {
		t.Fatalf("Commit(key for another turn) = %v, want ErrDuplicate", err)
	}
	// Scopes and owners keep keys apart.
	fork := persistence.IdempotencyRow{Scope: persistence.ScopeFork, Owner: b, Key: "retry-1", Hash: "h2", Branch: messages.NewID[messages.BranchID](now)}
	if _, err := d.Commit(bg, &persistence.Tx{Keys: []persistence.IdempotencyRow{fork}}); err != nil {
		t.Fatalf("Commit(same key, fork scope) = %v", err)
	}
	// Bad keys fail the whole Tx.
	s := persistence.SessionRow{ID: messages.NewID[messages.SessionID](now)}
	for _, bad := range []string{"", strings.Repeat("k", persistence.MaxIdempotencyKey+1), "tab\there", "é"} {
		r := row
		r.Key = bad
		_, err := d.Commit(bg, &persistence.Tx{Sessions: []persistence.SessionRow{s}, Keys: []persistence.IdempotencyRow{r}})
		if !errors.Is(err, persistence.ErrInvalidArgument) || !strings.Contains(err.Error(), "idempotency key") {
			t.Errorf("Commit(key %q) = %v, want ErrInvalidArgument naming the idempotency key", bad, err)
		}
	}
	if _, err := d.Session(bg, s.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("a Tx with a bad key wrote its session: %v", err)
	}
	d = reopen()
	got, err := d.IdempotencyKey(bg, persistence.ScopeTurn, b, "retry-1")
	if err != nil || got.Turn != turn || got.Hash != "h1" {
		t.Fatalf("IdempotencyKey after reopen = %+v, %v; want turn %s, hash h1", got, err, turn)
	}
	if got, err := d.IdempotencyKey(bg, persistence.ScopeFork, b, "retry-1"); err != nil || got.Branch != fork.Branch {
		t.Fatalf("fork key after reopen = %+v, %v", got, err)
	}
	if _, err := d.IdempotencyKey(bg, persistence.ScopeTurn, messages.NewID[messages.BranchID](now), "retry-1"); !errors.Is(err, persistence.ErrKeyNotFound) {
		t.Fatalf("key of another branch = %v, want ErrKeyNotFound", err)
	}
}

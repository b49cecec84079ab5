package ctxinf_test

import (
	"context"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf"
	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A library user keeps the store in PostgreSQL by giving its URL: a
// conversation written through one runtime is there for another
// opened on the same database later, from another directory.
func TestOpenOnPostgres(t *testing.T) {
	url := pgtest.Start(t)
	ctx := context.Background()
	rt, err := ctxinf.Open(ctx, ctxinf.Options{DataDir: t.TempDir(), PostgresURL: url})
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := rt.CreateSession(ctx, "on postgres")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rt.Ask(ctx, b, "Remember: the launch code is tulip-42."); err != nil {
		t.Fatal(err)
	}
	rt.Close()

	rt, err = ctxinf.Open(ctx, ctxinf.Options{DataDir: t.TempDir(), PostgresURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	entries, _, err := rt.History(ctx, b.ID, messages.TurnID{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || !strings.Contains(entries[0].Message.RenderedText, "tulip-42") {
		t.Fatalf("history on a second runtime: %+v", entries)
	}
	if _, err := ctxinf.Open(ctx, ctxinf.Options{DataDir: t.TempDir(), PostgresURL: url, EncryptionKey: make([]byte, 32)}); err == nil {
		t.Fatal("an encryption key with PostgreSQL was accepted")
	}
}

package pgdb

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/contextinfinity/ctxinf/internal/pgtest"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// TestMain stops the PostgreSQL server of the tests (if one started) and
// removes its directory before the binary exits.
func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()

// tablesHolding returns the ctx_* tables of the database at url (every
// one: they are listed from information_schema) with a row holding
// needle: in a BYTEA column (a row's text shows it in hex), in a text
// column, or in a blob's payload (decoded: blobs are compressed).
func tablesHolding(t *testing.T, url string, needle []byte) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_name LIKE 'ctx\_%' ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 20 {
		t.Fatalf("ctx tables: %v, %v", tables, err)
	}
	hexNeedle, raw := hex.EncodeToString(needle), string(needle)
	if !utf8.ValidString(raw) || strings.ContainsRune(raw, 0) {
		raw = hexNeedle // an id: text columns hold none
	}
	var out []string
	for _, table := range tables {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM `+table+` t WHERE strpos(t::text, $1) > 0 OR strpos(t::text, $2) > 0`,
			hexNeedle, raw).Scan(&n)
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		if n == 0 && table == "ctx_blobs" {
			rows, err := conn.Query(ctx, `SELECT hash, rec FROM ctx_blobs`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var h, rec []byte
				if err := rows.Scan(&h, &rec); err != nil {
					t.Fatal(err)
				}
				if b, err := persistence.DecodeBlob(persistence.Hash(h), rec, 64<<20); err == nil && bytes.Contains(b, needle) {
					n++
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%s (%d rows)", table, n))
		}
	}
	return out
}

func ids(ts []persistence.Node) []messages.NodeID {
	out := make([]messages.TurnID, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func sameIDs(t *testing.T, what string, got, want []persistence.Node) {
	t.Helper()
	g, w := ids(got), ids(want)
	if len(g) != len(w) {
		t.Fatalf("%s: got %d turns, want %d", what, len(g), len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("%s: turn %d = %s (depth %d), want %s", what, i, g[i], got[i].Depth, w[i])
		}
	}
}

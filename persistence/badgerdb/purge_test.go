package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/zstd"

	"github.com/contextinfinity/ctxinf/messages"
)

// filesHolding returns the files under dir whose bytes hold marker, raw or
// inside a zstd frame (Badger compresses its tables' blocks, the store
// its blobs).
func filesHolding(t *testing.T, dir string, marker []byte) []string {
	t.Helper()
	var out []string
	magic := []byte{0x28, 0xb5, 0x2f, 0xfd}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found := bytes.Contains(b, marker)
		for i := 0; !found; {
			j := bytes.Index(b[i:], magic)
			if j < 0 {
				break
			}
			i += j
			if dec, err := zstd.NewReader(bytes.NewReader(b[i:])); err == nil {
				plain, _ := io.ReadAll(io.LimitReader(dec, 64<<20))
				dec.Close()
				found = bytes.Contains(plain, marker)
			}
			i++
		}
		if found {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPurgeCutShortIsFinishedAtOpen: a delete's marker left by a crash
// (the group committed, its drop not done) is finished by Open.
func TestPurgeCutShortIsFinishedAtOpen(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	f := storetest.WriteSession(t, d, "CUT-SHORT-88e1", 1)
	marker := metaKey(purgeMeta + "test")
	drop := [][]byte{id16(tableStateRow, f.Branch), marker}
	if err := d.writeRaw([]entry{{key: marker, val: encodePrefixes(drop)}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err = Open(TestOptions(dir)); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.StateRow(context.Background(), f.Branch, 1); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("StateRow after the open = %v, want ErrNotFound (dropped)", err)
	}
	if _, err := d.TurnRows(context.Background(), f.Branch, 0, 10); err != nil {
		t.Errorf("TurnRows = %v (kept)", err)
	}
	n := 0
	err = d.read(func(txn *badger.Txn) error {
		return eachRow(txn, metaKey(purgeMeta), false, func(_, _ []byte) error { n++; return nil })
	})
	if err != nil || n != 0 {
		t.Errorf("markers left: %d, %v", n, err)
	}
}

// BenchmarkPurge measures a session's delete (of turns turns) in a store
// holding others sessions of as many turns, with the server's options:
// the whole call and its scrub (while the store's writes wait).
func BenchmarkPurge(b *testing.B) {
	// big: the deleted session also has a 100 KiB turn, in the value
	// log: the delete reopens Badger and runs value-log GC.
	for _, c := range []struct {
		turns, others int
		big           bool
	}{{10, 10, false}, {10, 10, true}, {200, 100, false}} {
		b.Run(fmt.Sprintf("turns=%d/others=%d/big=%t", c.turns, c.others, c.big), func(b *testing.B) {
			dir := b.TempDir()
			o := DefaultOptions(dir)
			o.GCInterval = 0
			d, err := Open(o)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			for range c.others {
				storetest.WriteSession(b, d, "OTHER", c.turns)
			}
			if err := d.Compact(); err != nil {
				b.Fatal(err)
			}
			var took, scrub time.Duration
			for b.Loop() {
				b.StopTimer()
				f := storetest.WriteSession(b, d, "GONE", c.turns)
				if c.big {
					appendBig(b, d, f, uint64(c.turns+1), bigPayload("GONE", 100<<10))
				}
				b.StartTimer()
				res, err := d.Purge(context.Background(), persistence.PurgeSpec{Session: f.Session, DeleteSession: true, Actors: []string{f.Actor}})
				if err != nil {
					b.Fatal(err)
				}
				took, scrub = took+res.Took, scrub+res.Scrub
			}
			b.ReportMetric(float64(took.Microseconds())/1e3/float64(b.N), "ms/delete")
			b.ReportMetric(float64(scrub.Microseconds())/1e3/float64(b.N), "scrub-ms/delete")
		})
	}
}

// bigPayload is a payload of n bytes (over the value threshold, stored in
// Badger's value log even compressed) holding marker.
func bigPayload(marker string, n int) string {
	b := make([]byte, 0, n)
	r := uint64(0x9e3779b97f4a7c15)
	for len(b) < n {
		b = append(b, marker...)
		for range 64 {
			r ^= r << 13
			r ^= r >> 7
			r ^= r << 17
			b = append(b, 'a'+byte(r%26))
		}
	}
	return string(b[:n])
}

// appendBig appends to f's branch a turn whose payload, and the response
// of its step, are big.
func appendBig(t testing.TB, d storetest.DB, f storetest.SessionFixture, seq uint64, big string) messages.NodeID {
	t.Helper()
	now := time.Now()
	turn, step := messages.NewID[messages.NodeID](now), messages.NewID[messages.StepID](now)
	resp, _ := json.Marshal(map[string]string{"output": big})
	tx := &persistence.Tx{
		Appends:  []persistence.TxAppend{{Branch: f.Branch, ID: turn, Req: persistence.AppendRequest{Payload: []byte(big)}}},
		NewTurns: []persistence.TurnRow{{Branch: f.Branch, Seq: seq, ID: turn, Phase: messages.PhaseDone, Step: step, Updated: now}},
		Steps: []persistence.StepRow{{ID: step, Branch: f.Branch, Turn: turn, Request: []byte(`{}`), Response: resp,
			Outcome: messages.StepOutcome{Kind: messages.OutcomeCompleted}}},
	}
	if _, err := d.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	return turn
}

// TestPurgeValueLog deletes a session whose payloads are in Badger's value
// log, in the file Badger is writing: the delete reopens Badger and
// rewrites the files, and no file holds the marker once Purge returns,
// while reads of another session run throughout. The session kept, whose
// values GC moved, reads back, and after a reopen too.
func TestPurgeValueLog(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Close() }()
	ctx := context.Background()
	gone, kept := "VLOG-GONE-5c1e07", "VLOG-KEPT-b3a9d4"
	fk := storetest.WriteSession(t, d, kept, 1)
	appendBig(t, d, fk, 2, bigPayload(kept, 100<<10))
	fg := storetest.WriteSession(t, d, gone, 1)
	appendBig(t, d, fg, 2, bigPayload(gone, 100<<10))
	appendBig(t, d, fg, 3, bigPayload(gone, 200<<10))
	if got := filesHolding(t, dir, []byte(gone)); !slices.ContainsFunc(got, func(f string) bool { return strings.HasSuffix(f, ".vlog") }) {
		t.Fatalf("before the delete no value-log file holds %s (files: %v): the test does not test the value log", gone, got)
	}
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			p, err := d.Last(ctx, fk.Branch, 10)
			if err == nil {
				_, err = d.Blob(ctx, p.Nodes[len(p.Nodes)-1].PayloadHash)
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	res, err := d.Purge(ctx, persistence.PurgeSpec{Session: fg.Session, DeleteSession: true, Actors: []string{fg.Actor}})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-readErr; err != nil {
		t.Errorf("a read during the delete: %v", err)
	}
	if res.ValueLogPending {
		t.Errorf("Purge = %+v: value log pending, want it rewritten", res)
	}
	if got := filesHolding(t, dir, []byte(gone)); len(got) > 0 {
		t.Errorf("after the delete %s is still in %v", gone, got)
	}
	checkKept := func() {
		t.Helper()
		p, err := d.Last(ctx, fk.Branch, 10)
		if err != nil || len(p.Nodes) != 2 {
			t.Fatalf("Last(kept) = %d turns, %v; want 2", len(p.Nodes), err)
		}
		b, err := d.Blob(ctx, p.Nodes[1].PayloadHash)
		if err != nil || !bytes.HasPrefix(b, []byte(kept)) || len(b) != 100<<10 {
			t.Errorf("Blob(kept) = %d bytes, %v", len(b), err)
		}
	}
	checkKept()
	// The store goes on: a write after the delete (synced into the logs
	// Badger opened), a crash-free close, and a reopen.
	appendBig(t, d, fk, 3, bigPayload(kept, 150<<10))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err = Open(TestOptions(dir)); err != nil {
		t.Fatal(err)
	}
	p, err := d.Last(ctx, fk.Branch, 10)
	if err != nil || len(p.Nodes) != 3 {
		t.Fatalf("after a reopen Last(kept) = %d turns, %v; want 3", len(p.Nodes), err)
	}
	if got := filesHolding(t, dir, []byte(gone)); len(got) > 0 {
		t.Errorf("after a reopen %s is in %v", gone, got)
	}
	err = d.read(func(txn *badger.Txn) error {
		ok, err := hasKey(txn, metaKey(purgeVlogMeta))
		if ok {
			err = errors.New("the value-log marker is left")
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
}

// TestPurgeValueLogPendingWhileRead: a read that does not end within
// reopenWait makes the delete give up reopening Badger (it says the value
// log is pending, and does not wait on the read for good); the next open
// rewrites the file, and then no file holds the marker.
func TestPurgeValueLogPendingWhileRead(t *testing.T) {
	defer func(w time.Duration) { reopenWait = w }(reopenWait)
	reopenWait = 200 * time.Millisecond
	dir := t.TempDir()
	d, err := Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Close() }()
	ctx := context.Background()
	gone := "VLOG-HELD-0d7f2a"
	fk := storetest.WriteSession(t, d, "kept", 2)
	fg := storetest.WriteSession(t, d, gone, 1)
	appendBig(t, d, fg, 2, bigPayload(gone, 100<<10))
	inRead, release := make(chan struct{}), make(chan struct{})
	readDone := make(chan error, 1)
	go func() {
		first := true
		readDone <- d.EachTurnRow(ctx, fk.Branch, func(persistence.TurnRow) error {
			if first {
				first = false
				close(inRead)
				<-release
			}
			return nil
		})
	}()
	<-inRead
	res, err := d.Purge(ctx, persistence.PurgeSpec{Session: fg.Session, DeleteSession: true, Actors: []string{fg.Actor}})
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-readDone; err != nil {
		t.Errorf("the read held over the delete: %v", err)
	}
	if !res.ValueLogPending {
		t.Errorf("Purge = %+v: want the value log pending (a read held Badger open)", res)
	}
	if _, err := d.Session(ctx, fg.Session); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("Session(deleted) = %v, want ErrNotFound", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err = Open(TestOptions(dir)); err != nil {
		t.Fatal(err)
	}
	if got := filesHolding(t, dir, []byte(gone)); len(got) > 0 {
		t.Errorf("after a reopen %s is in %v", gone, got)
	}
}

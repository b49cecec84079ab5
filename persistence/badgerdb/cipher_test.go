package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/storetest"

	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// An encrypted store holds no payload in the clear in any of its files,
// reads back with its key, and refuses to open without it, with another
// key, or, for a store created without encryption, with one: each with
// an error saying which.
func TestEncryptedStore(t *testing.T) {
	marker := []byte("QUOKKA-5521-payload ")
	key := storetest.EncryptionKey(32, 5)
	dir := t.TempDir()
	o := TestOptions(dir)
	o.EncryptionKey = key
	s, err := OpenBadger(o)
	if err != nil {
		t.Fatal(err)
	}
	h, turns := writeMarked(t, s, marker)
	if !bytes.Equal(o.EncryptionKey, key) {
		t.Fatal("OpenBadger changed the caller's key")
	}
	if found := filesHolding(t, dir, marker); len(found) > 0 {
		t.Errorf("payload in the clear in %v", found)
	}

	s, err = OpenBadger(o)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := s.Range(bg, h.Branch, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	storetest.SameIDs(t, "the encrypted store reopened", rp.Nodes, turns)
	if p, err := s.Blob(bg, rp.Nodes[11].PayloadHash); err != nil || !bytes.HasPrefix(p, fmt.Appendf(nil, "%s11 ", marker)) {
		t.Errorf("payload 11 = %.40q, %v", p, err)
	}
	s.Close()

	for _, tc := range []struct {
		name string
		key  []byte
		want error
	}{{"no key", nil, persistence.ErrEncrypted}, {"another key", storetest.EncryptionKey(32, 6), persistence.ErrWrongKey}, {"a key of another size", storetest.EncryptionKey(16, 5), persistence.ErrWrongKey}} {
		o := TestOptions(dir)
		o.EncryptionKey = tc.key
		if s, err := OpenBadger(o); !errors.Is(err, tc.want) {
			if err == nil {
				s.Close()
			}
			t.Errorf("open with %s = %v, want %v", tc.name, err, tc.want)
		} else if !strings.Contains(err.Error(), "store.encryption") && tc.want == persistence.ErrEncrypted {
			t.Errorf("open with %s = %v, want the settings named", tc.name, err)
		}
	}

	// The control: without encryption the scan finds the payloads.
	plain := t.TempDir()
	s, err = OpenBadger(TestOptions(plain))
	if err != nil {
		t.Fatal(err)
	}
	writeMarked(t, s, marker)
	if found := filesHolding(t, plain, marker); len(found) == 0 {
		t.Errorf("no payload in the clear in a plain store: the scan finds nothing")
	}
	po := TestOptions(plain)
	po.EncryptionKey = key
	if s, err := OpenBadger(po); !errors.Is(err, persistence.ErrNotEncrypted) || !strings.Contains(err.Error(), "export") {
		if err == nil {
			s.Close()
		}
		t.Errorf("open a plain store with a key = %v, want ErrNotEncrypted saying to export", err)
	}
	// The refused opens left both stores as they were.
	for _, d := range []struct {
		dir string
		key []byte
	}{{dir, key}, {plain, nil}} {
		o := TestOptions(d.dir)
		o.EncryptionKey = d.key
		s, err := OpenBadger(o)
		if err != nil {
			t.Fatalf("reopen %s after the refused opens: %v", d.dir, err)
		}
		s.Close()
	}
}

// writeMarked appends payloads starting with marker to a new branch of s,
// small ones (in the WAL and LSM tree) and large ones (in the value log),
// of random bytes so that compression keeps them as they are, and closes
// s.
func writeMarked(t *testing.T, s persistence.Store, marker []byte) (persistence.Head, []persistence.Node) {
	t.Helper()
	h, err := s.CreateBranch(bg, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	var turns []persistence.Node
	for i := range 12 {
		p := fmt.Appendf(nil, "%s%d ", marker, i)
		for range 1 + i*i*1000 {
			p = append(p, byte(rnd.Uint32()))
		}
		tr, err := s.Append(bg, h.Branch, persistence.AppendRequest{Payload: p, TypeTag: 1})
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, tr)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return h, turns
}

// The redo log of an encrypted store does not open under another key.
func TestEncryptedRedoWrongKey(t *testing.T) {
	dir := t.TempDir()
	l, _, err := openRedo(dir, 1<<16, storetest.Cipher(t, storetest.EncryptionKey(24, 1)), func(uint64, []entry) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := l.prepare(); err != nil {
		t.Fatal(err)
	}
	if err := l.startLap(); err != nil {
		t.Fatal(err)
	}
	if err := l.append(10, []entry{{key: []byte("k"), val: []byte("secret value")}}); err != nil {
		t.Fatal(err)
	}
	l.sync()
	l.close()
	noop := func(uint64, []entry) error { return nil }
	for _, tc := range []struct {
		name string
		c    *persistence.Cipher
		want error
	}{{"another key", storetest.Cipher(t, storetest.EncryptionKey(24, 2)), persistence.ErrWrongKey}, {"no key", nil, persistence.ErrEncrypted}} {
		if l, _, err := openRedo(dir, 1<<16, tc.c, noop); !errors.Is(err, tc.want) {
			if err == nil {
				l.close()
			}
			t.Errorf("open with %s = %v, want %v", tc.name, err, tc.want)
		}
	}
	var got []string
	l, n, err := openRedo(dir, 1<<16, storetest.Cipher(t, storetest.EncryptionKey(24, 1)), func(ts uint64, es []entry) error {
		got = append(got, fmt.Sprintf("%d %s=%s", ts, es[0].key, es[0].val))
		return nil
	})
	if err != nil || n != 1 || len(got) != 1 || got[0] != "10 k=secret value" {
		t.Fatalf("open with the key = %d groups %v, %v", n, got, err)
	}
	l.close()
}

package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testKey returns a key of n bytes made from seed.
func testKey(n int, seed byte) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = seed + byte(i)*7
	}
	return k
}

func testCipher(t testing.TB, key []byte) *Cipher {
	t.Helper()
	c, err := NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewCipherKeyLengths(t *testing.T) {
	for _, n := range []int{0, 1, 15, 17, 31, 33, 64} {
		if _, err := NewCipher(make([]byte, n)); !errors.Is(err, ErrInvalidArgument) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%d bytes", n)) {
			t.Errorf("NewCipher(%d bytes) = %v, want ErrInvalidArgument naming the length", n, err)
		}
	}
	for _, n := range []int{16, 24, 32} {
		c, err := NewCipher(testKey(n, 1))
		if err != nil || c.KeyBits() != 8*n || len(c.badger) != n {
			t.Errorf("NewCipher(%d bytes) = %v, %v", n, c, err)
		}
	}
}

// scanFiles returns the files under dir whose bytes hold marker.
func scanFiles(t *testing.T, dir string, marker []byte) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, marker) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// writeEncryptedJournal writes n text events holding marker with cipher c.
func writeEncryptedJournal(t *testing.T, dir string, c *Cipher, marker string, n int) (string, []JournalEntry) {
	t.Helper()
	clock := newJournalClock()
	policy := srdPolicy
	policy.Cipher = c
	j, err := CreateJournal(dir, newJournalStep(t), "local", policy, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	var want []JournalEntry
	for i := range n {
		text := fmt.Sprintf("%s %d\nnext", marker, i)
		payload := fmt.Appendf(nil, `{"delta":%q}`, text)
		if _, err := j.AppendText("delta", payload, text); err != nil {
			t.Fatal(err)
		}
		want = append(want, JournalEntry{TS: clock.t.UTC(), Provider: "local", EventType: "delta", Seq: uint64(i + 1),
			Payload: payload, Text: text})
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return j.Path(), want
}

func sameEntries(t *testing.T, what string, got, want []JournalEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !g.TS.Equal(w.TS) || g.Provider != w.Provider || g.EventType != w.EventType || g.Seq != w.Seq ||
			!bytes.Equal(g.Payload, w.Payload) || g.Text != w.Text {
			t.Errorf("%s: entry %d = %+v, want %+v", what, i, g, w)
		}
	}
}

// An encrypted journal holds no byte of its text in the clear and reads
// back whole with the key; without it, or with another, reading says so.
func TestEncryptedJournalRoundTrip(t *testing.T) {
	const marker = "ZEBRA-7731-marker"
	for _, n := range []int{16, 24, 32} {
		t.Run(fmt.Sprintf("key=%d", n), func(t *testing.T) {
			dir := t.TempDir()
			c := testCipher(t, testKey(n, 3))
			path, want := writeEncryptedJournal(t, dir, c, marker, 5)
			if found := scanFiles(t, dir, []byte(marker)); len(found) > 0 {
				t.Errorf("marker in the clear in %v", found)
			}
			raw, _ := os.ReadFile(path)
			for i, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
				if len(line) == 0 || line[0] != sealedLinePrefix {
					t.Errorf("line %d = %.20q…, want it sealed", i+1, line)
				}
			}
			got, torn, err := ReadJournal(path, c)
			if err != nil || torn {
				t.Fatalf("ReadJournal = torn %v, %v", torn, err)
			}
			sameEntries(t, "read with the key", got, want)
			if r, err := RecoverJournal(path, c); err != nil || r.Size != uint64(len(raw)) || r.Valid != r.Size {
				t.Errorf("RecoverJournal = size %d valid %d, %v; want %d both", r.Size, r.Valid, err, len(raw))
			}
			if text := JournalText(got); !strings.Contains(text, marker+" 4") {
				t.Errorf("JournalText = %q", text)
			}

			if _, _, err := ReadJournal(path, nil); !errors.Is(err, ErrEncrypted) {
				t.Errorf("ReadJournal without a key = %v, want ErrEncrypted", err)
			}
			if _, _, err := ReadJournal(path, testCipher(t, testKey(n, 4))); !errors.Is(err, ErrWrongKey) {
				t.Errorf("ReadJournal with another key = %v, want ErrWrongKey", err)
			}
		})
	}
	// A plain journal read with a key is not taken for a torn one.
	dir := t.TempDir()
	path, _ := writeTestJournal(t, dir, 1)
	if _, _, err := ReadJournal(path, testCipher(t, testKey(16, 1))); !errors.Is(err, ErrNotEncrypted) {
		t.Errorf("ReadJournal of a plain journal with a key = %v, want ErrNotEncrypted", err)
	}
	// Nor an encrypted journal of one line read without the key.
	path, _ = writeEncryptedJournal(t, dir, testCipher(t, testKey(16, 1)), marker, 1)
	if _, _, err := ReadJournal(path, nil); !errors.Is(err, ErrEncrypted) {
		t.Errorf("ReadJournal of a one-line encrypted journal without a key = %v, want ErrEncrypted", err)
	}
}

// A crash mid-write leaves a torn final line, which recovery drops,
// keeping the lines before; a damaged or moved line in the middle is
// corruption.
func TestEncryptedJournalTorn(t *testing.T) {
	dir := t.TempDir()
	c := testCipher(t, testKey(32, 9))
	path, want := writeEncryptedJournal(t, dir, c, "torn", 4)
	raw, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(raw, []byte("\n"))[:4]
	three := len(lines[0]) + len(lines[1]) + len(lines[2])

	read := func(data []byte) ([]JournalEntry, RecoveredJournal, error) {
		t.Helper()
		p := filepath.Join(t.TempDir(), filepath.Base(path)) // the key is the file's
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := RecoverJournal(p, c)
		return r.Entries, r, err
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"cut mid-line", raw[:three+len(lines[3])/2]},
		{"cut before the newline", raw[:three+len(lines[3])-1]},
		{"cut after the prefix", raw[:three+1]},
		{"zero-filled tail", append(append([]byte{}, raw[:three]...), make([]byte, len(lines[3]))...)},
		{"zero-filled tail with newline", append(append(append([]byte{}, raw[:three]...), make([]byte, 40)...), '\n')},
		{"last line's end zeroed", append(append(append([]byte{}, raw[:three+len(lines[3])/2]...), make([]byte, len(lines[3])/2-1)...), '\n')},
	} {
		got, r, err := read(tc.data)
		if err != nil || !r.Torn {
			t.Errorf("%s: torn %v, %v; want torn", tc.name, r.Torn, err)
			continue
		}
		sameEntries(t, tc.name, got, want[:3])
		if r.Valid != uint64(three) || r.Size != uint64(len(tc.data)) {
			t.Errorf("%s: valid %d size %d, want %d %d", tc.name, r.Valid, r.Size, three, len(tc.data))
		}
	}

	flipped := append([]byte{}, raw...)
	flipped[len(lines[0])+20] ^= 1 // in line 2's sealed bytes
	swapped := append(append(append(append([]byte{}, lines[1]...), lines[0]...), lines[2]...), lines[3]...)
	dropped := append(append(append([]byte{}, lines[0]...), lines[2]...), lines[3]...)
	for _, tc := range []struct {
		name string
		data []byte
	}{{"a damaged middle line", flipped}, {"lines swapped", swapped}, {"a middle line dropped", dropped}} {
		if _, _, err := read(tc.data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", tc.name, err)
		}
	}
	// A journal's lines do not open in another journal's file.
	other, _ := writeEncryptedJournal(t, dir, c, "other", 1)
	if err := os.WriteFile(other, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := RecoverJournal(other, c); err == nil && len(r.Entries) > 0 {
		t.Errorf("another journal's lines opened: %d entries", len(r.Entries))
	}
}

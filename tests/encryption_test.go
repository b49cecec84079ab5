package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
)

// countFiles is the number of regular files under dir, recursively.
func countFiles(t *testing.T, dir string) (files int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// SRD §14.3: with store.encryption on, no byte of a conversation is in
// the clear anywhere under the data directory (the store, its redo log,
// the stream journals, everything else), after turns that finished, a
// SIGKILL in the middle of a streamed reply, and a SIGTERM; restarted with
// the key, the server reads the history and the recovered partial output
// back. The control runs the same without encryption and finds the
// marker, so the scan can fail. Started without the key or with another,
// the server refuses, saying why.
func TestServeEncryptionAtRest(t *testing.T) {
	t.Parallel()
	key := randomHex(t, 32)
	for _, encrypted := range []bool{true, false} {
		t.Run(fmt.Sprintf("encrypted=%v", encrypted), func(t *testing.T) {
			t.Parallel()
			var keyEnv []string
			if encrypted {
				keyEnv = []string{"CTX_STORE_ENCRYPTION=true", "CTX_STORE_KEY=" + key}
			}
			testServeEncryptionAtRest(t, encrypted, keyEnv)
		})
	}
}

func testServeEncryptionAtRest(t *testing.T, encrypted bool, keyEnv []string) {
	dir := t.TempDir()
	marker := "MARKER" + strings.ToUpper(randomHex(t, 8))
	ctx := context.Background()
	// Slow deltas, flushed and fsynced at once, so that the SIGKILL
	// finds a journal of the reply on disk.
	streaming := append([]string{"CTX_LOCAL_DELAY=40ms", "CTX_STREAM_FLUSH_INTERVAL=1ms", "CTX_STREAM_FSYNC_INTERVAL=1ms"}, keyEnv...)
	s := startServe(t, dir, streaming...)
	c := client.New(s.url)
	_, b, err := c.CreateSession(ctx, "secret "+marker)
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for i := range 3 {
		text := fmt.Sprintf("Remember the code word %s number %d.", marker, i)
		if res, err := c.Send(ctx, b.ID, text); err != nil || res.Phase != messages.PhaseResponseFinalized {
			t.Fatalf("turn %d: %+v, %v", i, res, err)
		}
		sent = append(sent, text)
	}

	// A reply streams, echoing the marker, and the server is killed.
	var turn messages.TurnID
	var seen string
	_, err = c.Stream(ctx, b.ID, "Tell me a long story that mentions "+marker+" at the start.", func(ev client.Event) error {
		switch ev.Type {
		case "turn":
			turn = ev.Turn
		case "delta":
			seen += ev.Text
			if ev.Durable > 0 && strings.Contains(seen, marker) {
				_ = s.cmd.Process.Kill()
				<-s.done
				return errKilled
			}
		case "done":
			t.Fatalf("the turn ended before the kill: %+v", ev)
		}
		return nil
	})
	if !errors.Is(err, errKilled) || turn.IsZero() {
		t.Fatalf("stream: %v (turn %s)", err, turn)
	}
	scan := func(when string) {
		t.Helper()
		// The scan of the delete tests: raw bytes, and the inside of
		// every zstd frame (Badger compresses its tables).
		found, files := filesHolding(t, dir, marker), countFiles(t, dir)
		switch {
		case encrypted && len(found) > 0:
			t.Errorf("%s: the marker is in the clear in %d of %d files under the data dir: %v", when, len(found), files, found)
		case !encrypted && len(found) == 0:
			t.Errorf("%s: without encryption the marker is in none of the %d files: the scan cannot fail", when, files)
		case !encrypted:
			t.Logf("%s, without encryption: the marker is in %v", when, found)
		}
		if journals, _ := filepath.Glob(filepath.Join(dir, "streams", "*.jseg")); len(journals) == 0 {
			t.Errorf("%s: no stream journal under the data dir: the scan covers none", when)
		}
		if _, err := os.Stat(filepath.Join(dir, "store", "ctxinf.redo")); err != nil {
			t.Errorf("%s: no redo log: %v", when, err)
		}
	}
	scan("after the SIGKILL")

	// Restarted with the key: the history and the recovered output read back.
	s = startServe(t, dir, keyEnv...)
	c = client.New(s.url)
	hist, _, err := c.History(ctx, b.ID, messages.TurnID{}, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 7 {
		t.Fatalf("history of %d messages, want 3 turns, their replies and the interrupted turn: %+v", len(hist), hist)
	}
	for i, text := range sent {
		if u, a := hist[2*i].Message, hist[2*i+1].Message; u.RenderedText != text || !strings.Contains(a.RenderedText, marker) {
			t.Errorf("turn %d reads back as %q → %q, want %q and a reply echoing it", i, u.RenderedText, a.RenderedText, text)
		}
	}
	if p := hist[6].PartialReply; hist[6].Node != turn || p == nil || !p.Incomplete || !strings.Contains(p.Text, marker) {
		t.Errorf("the interrupted turn %+v, want its recovered partial output holding the marker", hist[6])
	}
	if res, err := c.Send(ctx, b.ID, "And once more: "+marker); err != nil || res.Phase != messages.PhaseResponseFinalized {
		t.Fatalf("a turn after the restart: %+v, %v", res, err)
	}
	s.stop(t)
	scan("after the SIGTERM")

	if !encrypted {
		return
	}
	// Without the key, or with another, the server does not start.
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no key", nil, "the data is encrypted and no encryption key was given"},
		{"the key's variable unset", []string{"CTX_STORE_ENCRYPTION=true"}, "CTX_STORE_KEY (store.encryption_key_env) is not set"},
		{"another key", []string{"CTX_STORE_ENCRYPTION=true", "CTX_STORE_KEY=" + randomHex(t, 32)}, "wrong encryption key"},
		{"a short key", []string{"CTX_STORE_ENCRYPTION=true", "CTX_STORE_KEY=" + randomHex(t, 20)}, "a key of 20 bytes (40 hex digits): want 16, 24 or 32 bytes"},
	} {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		cmd := exec.CommandContext(cctx, binary, "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		cmd.Env = env(dir, append([]string{fmt.Sprintf("CTX_SERVER_FRAME_ADDR=127.0.0.1:%d", freePort(t)), "CTX_STORE_KEY="}, tc.env...)...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("serve with %s: %v, output %s; want it to fail saying %q", tc.name, err, out, tc.want)
		}
	}
	// Those refusals touched nothing: the key still opens it.
	s = startServe(t, dir, keyEnv...)
	if hist, _, err := client.New(s.url).History(ctx, b.ID, messages.TurnID{}, 50); err != nil || len(hist) != 9 {
		t.Errorf("history after the refused starts: %d messages, %v; want 9", len(hist), err)
	}
	s.stop(t)
}

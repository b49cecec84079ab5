package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smallStore keeps the store's files small enough for a tmpfs of a few
// MiB: 1 MiB memtables, a 1 MiB redo log, 16 MiB kept free.
var smallStore = []string{
	"CTX_STORE_MEMTABLE_BYTES=1048576", "CTX_STORE_MAX_PAYLOAD_BYTES=1048576",
	"CTX_STORE_VALUE_LOG_FILE_BYTES=2097152", "CTX_STORE_REDO_LOG_BYTES=1048576",
	"CTX_STORE_BLOCK_CACHE_BYTES=1048576", "CTX_STORE_MIN_FREE_BYTES=16777216",
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// at cleanup (after the servers started later are killed); it skips the
// test where the OS refuses the mount.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs here (it needs root): %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

func frameAddr(t *testing.T) string { return "127.0.0.1:" + strconv.Itoa(freePort(t)) }

// alive fails the test if the server has exited (a SIGBUS would).
func (s *server) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		t.Fatalf("ctxinf serve exited: %v", err)
	default:
	}
}

// call sends a JSON request and returns the status and body.
func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fill appends to the file path until dir's file system has at most
// leave bytes free (0: none at all).
func fill(t *testing.T, dir, path string, leave int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int64{1 << 20, 4096, 1} {
		buf := bytes.Repeat([]byte{0xa5}, int(chunk))
		for freeBytes(t, dir)-chunk >= leave {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v", path, err)
				}
				break
			}
		}
	}
	if free := freeBytes(t, dir); free > leave+4096 {
		t.Fatalf("filled %s, and %d bytes are still free, want at most %d", dir, free, leave)
	}
}

// On a full disk, turns and new sessions are refused with a 507 naming the
// free and needed bytes, reads go on and the process lives; once space is
// freed, turns succeed again with no restart. A SIGTERM on a full disk
// exits cleanly, a start on it is refused with a clear message, and every
// turn acknowledged is there after the space is back, across a SIGKILL
// too. Before, Badger died of a SIGBUS as the disk filled.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	s := startServe(t, dir, smallStore...)

	code, body := call(t, "POST", s.url+"/v1/sessions", `{"title":"disk full"}`)
	if code != 201 {
		t.Fatalf("create session: %d %s", code, body)
	}
	var created struct{ Branch struct{ ID string } }
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	b := created.Branch.ID
	var acked []string // user texts of the turns acknowledged
	turn := func(s *server, text string) (int, []byte) {
		t.Helper()
		code, body := call(t, "POST", s.url+"/v1/branches/"+b+"/turns", fmt.Sprintf(`{"text":%q}`, text))
		if code == 200 {
			var res struct{ Phase, Reply string }
			if err := json.Unmarshal(body, &res); err != nil || res.Phase != "response_finalized" || !strings.Contains(res.Reply, text) {
				t.Fatalf("turn %q: %s (%v)", text, body, err)
			}
			acked = append(acked, text)
		}
		return code, body
	}
	for i := range 3 {
		if code, body := turn(s, fmt.Sprintf("before the disk filled, turn %d", i)); code != 200 {
			t.Fatalf("turn %d: %d %s", i, code, body)
		}
	}
	// history checks that every acknowledged turn is there, with its reply.
	history := func(s *server) {
		t.Helper()
		code, body := call(t, "GET", s.url+"/v1/branches/"+b+"/history?limit=200", "")
		if code != 200 {
			t.Fatalf("history: %d %s", code, body)
		}
		var h struct {
			Entries []struct {
				Message struct {
					Role         string
					RenderedText string `json:"rendered_text"`
				}
			}
		}
		if err := json.Unmarshal(body, &h); err != nil {
			t.Fatal(err)
		}
		if len(h.Entries) != 2*len(acked) {
			t.Fatalf("history has %d messages, want %d (%d turns acknowledged): %s", len(h.Entries), 2*len(acked), len(acked), body)
		}
		for i, text := range acked {
			u, r := h.Entries[2*i].Message, h.Entries[2*i+1].Message
			if u.Role != "user" || u.RenderedText != text || r.Role != "assistant" || !strings.Contains(r.RenderedText, text) {
				t.Fatalf("history, turn %d: %+v, %+v; want %q and its reply", i, u, r, text)
			}
		}
	}
	refused := func(code int, body []byte, what string) {
		t.Helper()
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(body, &e)
		if code != http.StatusInsufficientStorage || e.Error.Code != "insufficient_storage" ||
			!strings.Contains(e.Error.Message, "bytes free") || !strings.Contains(e.Error.Message, "store.min_free_bytes") ||
			!strings.Contains(e.Error.Message, "free at least") {
			t.Fatalf("%s on a full disk: %d %s; want 507 insufficient_storage naming the free and needed bytes", what, code, body)
		}
	}

	// The disk fills in two steps: under the reserve, where new turns are
	// refused and what the store has under way (the turn's indexing) goes
	// on; then, once it is done, to the last byte. (Another process that
	// takes the last of the disk while Badger writes can still kill it:
	// see persistence/badgerdb/space.go.)
	filler := filepath.Join(mnt, "filler")
	fullDisk := func(s *server) {
		t.Helper()
		fill(t, mnt, filler, 12<<20)
		code, body := turn(s, "under the reserve")
		refused(code, body, "a turn")
		quiet(t, s, b)
		fill(t, mnt, filler, 0)
	}
	fullDisk(s)
	for i := range 3 {
		code, body := turn(s, fmt.Sprintf("on a full disk, turn %d", i))
		refused(code, body, "a turn")
	}
	code, body = call(t, "POST", s.url+"/v1/sessions", `{"title":"refused"}`)
	refused(code, body, "a new session")
	code, body = call(t, "POST", s.url+"/v1/chat/completions",
		`{"model":"local","user":"disk-full","messages":[{"role":"user","content":"hello"}]}`)
	refused(code, body, "a proxied turn")
	history(s)
	if code, body := call(t, "GET", s.url+"/v1/branches/"+b, ""); code != 200 {
		t.Fatalf("get branch on a full disk: %d %s", code, body)
	}
	if code, body := call(t, "GET", s.url+"/readyz", ""); code != 503 || !strings.Contains(string(body), `"status":"read_only"`) ||
		!strings.Contains(string(body), "bytes free") {
		t.Fatalf("/readyz on a full disk: %d %s; want 503 read_only naming the free bytes", code, body)
	}
	s.alive(t)

	// Space freed: turns succeed again, in the same process.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if code, body := turn(s, fmt.Sprintf("after space was freed, turn %d", i)); code != 200 {
			t.Fatalf("turn after space was freed: %d %s", code, body)
		}
	}
	if code, body := call(t, "GET", s.url+"/readyz", ""); code != 200 || !strings.Contains(string(body), `"status":"ready"`) {
		t.Fatalf("/readyz after space was freed: %d %s; want 200 ready", code, body)
	}
	history(s)

	// Full again: SIGTERM exits cleanly (Badger's memtable is not flushed
	// into a disk with no room for it), and a start is refused.
	fullDisk(s)
	code, body = turn(s, "refused again")
	refused(code, body, "a turn")
	s.stop(t)
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:"+strconv.Itoa(freePort(t)))
	cmd.Env = env(dir, append([]string{"CTX_SERVER_FRAME_ADDR=" + frameAddr(t)}, smallStore...)...)
	out, err := runWithin(cmd, 30*time.Second)
	if err == nil || !strings.Contains(out, "cannot start") || !strings.Contains(out, "bytes free") ||
		!strings.Contains(out, filepath.Join(dir, "store")) {
		t.Fatalf("ctxinf serve on a full disk: %v\n%s\nwant it refused, naming the store and the free bytes", err, out)
	}

	// Space back: every acknowledged turn is there, across a SIGKILL too.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s = startServe(t, dir, smallStore...)
	history(s)
	if code, body := turn(s, "after the restart"); code != 200 {
		t.Fatalf("turn after the restart: %d %s", code, body)
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s = startServe(t, dir, smallStore...)
	history(s)
	s.stop(t)
}

// A redo log the disk has no room for stops the start with a message
// naming its path, its size and the free bytes. Before, the server
// started with a shorter log than it was asked for.
func TestRedoLogCannotBeAllocated(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, 12<<20)
	dir := filepath.Join(mnt, "data")
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:"+strconv.Itoa(freePort(t)))
	cmd.Env = env(dir, append([]string{"CTX_SERVER_FRAME_ADDR=" + frameAddr(t)}, append(smallStore, "CTX_STORE_REDO_LOG_BYTES=16777216")...)...)
	out, err := runWithin(cmd, 30*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() <= 0 {
		t.Fatalf("ctxinf serve with a 16 MiB redo log on a 12 MiB disk: %v, want a non-zero exit\n%s", err, out)
	}
	redo := filepath.Join(dir, "store", "ctxinf.redo")
	for _, want := range []string{redo, "cannot allocate its 16777216 bytes (store.redo_log_bytes)", "bytes free"} {
		if !strings.Contains(out, want) {
			t.Errorf("ctxinf serve said:\n%s\nwant it to say %q", out, want)
		}
	}
	if st, err := os.Stat(redo); err != nil || st.Size() != 0 {
		t.Errorf("the redo log left behind: %v, %v; want it empty", st, err)
	}
}

// quiet waits until branch b has no turn in flight and every turn folded
// into its state is indexed, so that the store has no write under way.
func quiet(t *testing.T, s *server, b string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := call(t, "GET", s.url+"/v1/branches/"+b, "")
		var info struct {
			Committed uint64          `json:"committed"`
			Indexed   uint64          `json:"indexed"`
			InFlight  json.RawMessage `json:"in_flight"`
		}
		if code == 200 && json.Unmarshal(body, &info) == nil && info.Indexed == info.Committed &&
			(len(info.InFlight) == 0 || string(info.InFlight) == "null") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("branch %s still busy: %d %s", b, code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runWithin runs cmd, killed after d, and returns its output.
func runWithin(cmd *exec.Cmd, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go func() {
		<-ctx.Done()
		_ = cmd.Process.Kill()
	}()
	err := cmd.Wait()
	return out.String(), err
}

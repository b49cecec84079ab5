package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/messages"
)

// filesHolding returns the files under dir (every one, recursively)
// whose raw bytes hold marker, or whose zstd frames do once decompressed
// (Badger compresses its tables' blocks, the store its payloads).
func filesHolding(t *testing.T, dir, marker string) []string {
	t.Helper()
	var out []string
	m := []byte(marker)
	magic := []byte{0x28, 0xb5, 0x2f, 0xfd}
	// One decoder for every frame: a new one per frame costs more than
	// the frame (its buffers and goroutines, under -race).
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	err = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := readWritten(path)
		if err != nil {
			return err
		}
		found := bytes.Contains(b, m)
		for i := 0; !found; i++ {
			j := bytes.Index(b[i:], magic)
			if j < 0 {
				break
			}
			i += j
			if err := dec.Reset(bytes.NewReader(b[i:])); err == nil {
				plain, _ := io.ReadAll(io.LimitReader(dec, 64<<20))
				found = bytes.Contains(plain, m)
			}
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

// readWritten returns the bytes of the file at path up to the end of its
// last written (data) extent: the trailing hole of a sparse file (Badger
// preallocates its value log and memtable files by hundreds of MiB) reads
// as zeros, so it can hold neither a marker nor a zstd frame, and
// reading it costs seconds under -race. Holes inside the file are zeros,
// as a plain read gives them.
func readWritten(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const seekData, seekHole = 3, 4 // lseek(2)'s SEEK_DATA and SEEK_HOLE
	type extent struct{ from, to int64 }
	var data []extent
	for off := int64(0); ; {
		from, err := f.Seek(off, seekData)
		if err != nil {
			if errors.Is(err, syscall.ENXIO) { // no data past off
				break
			}
			return os.ReadFile(path) // no SEEK_DATA here: read it all
		}
		to, err := f.Seek(from, seekHole)
		if err != nil {
			return os.ReadFile(path)
		}
		data = append(data, extent{from, to})
		off = to
	}
	if len(data) == 0 {
		return nil, nil
	}
	b := make([]byte, data[len(data)-1].to)
	for _, x := range data {
		if _, err := f.ReadAt(b[x.from:x.to], x.from); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	return b, nil
}

func uniqueMarker(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// settle folds every pending turn of branch and waits until its turns
// are committed and indexed.
func settle(t *testing.T, c *client.Client, branch messages.BranchID) {
	t.Helper()
	ctx := context.Background()
	if err := c.Commit(ctx, branch); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		bi, err := c.Branch(ctx, branch)
		if err != nil {
			t.Fatal(err)
		}
		if bi.Pending == 0 && bi.Committed == bi.TurnSeq && bi.Indexed == bi.TurnSeq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("branch %s not committed and indexed: %+v", branch, bi)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proxied sends a turn through the OpenAI-compatible proxy onto branch.
func proxied(t *testing.T, url string, branch messages.BranchID, text string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"local","messages":[{"role":"user","content":%q}]}`, text)
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Ctx-Branch", branch.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(text)) {
		t.Fatalf("proxied turn: %d %s", resp.StatusCode, b)
	}
}

func wantStatus(t *testing.T, what string, err error, status int) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != status {
		t.Errorf("%s = %v, want %d", what, err, status)
	}
}

// bigText is about n bytes of text holding marker, which zstd does not
// shrink much (letters from a fixed pseudo-random sequence).
func bigText(marker string, n int) string {
	var b strings.Builder
	r := uint64(0x2545f4914f6cdd1d)
	for b.Len() < n {
		b.WriteString(marker)
		b.WriteByte(' ')
		for range 72 {
			r ^= r << 13
			r ^= r >> 7
			r ^= r << 17
			b.WriteByte('a' + byte(r%26))
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// TestServeDeleteSessionLeavesNoByte: a session whose turns (echoed by
// the local model; one of 100 KiB, in Badger's value log), pin, title and
// proxied turn hold a unique marker is
// committed and indexed, then deleted through the HTTP API; once the
// DELETE has answered, no file under the data dir (store, redo log,
// stream journals, all of it) holds a byte of the marker, and after a
// restart neither. Another session's marker, not deleted, is found and
// its session readable and searchable, so the scan can fail. Last, the
// CLI deletes that one on the data dir, and its marker goes too.
func TestServeDeleteSessionLeavesNoByte(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := "CTX_MODELS_LOCAL_CONTEXT_LIMIT=400000" // room for the big turn
	s := startServe(t, dir, big)
	ctx := context.Background()
	c := client.New(s.url)
	gone, kept := uniqueMarker("GONE-"), uniqueMarker("KEPT-")
	sg, bg, err := c.CreateSession(ctx, "title "+gone)
	if err != nil {
		t.Fatal(err)
	}
	sk, bk, err := c.CreateSession(ctx, "title "+kept)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		b      messages.BranchID
		marker string
	}{{bg.ID, gone}, {bk.ID, kept}} {
		if _, err := c.Pin(ctx, x.b, "pinned "+x.marker); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := c.Send(ctx, x.b, fmt.Sprintf("turn %d says %s", i, x.marker)); err != nil {
				t.Fatal(err)
			}
		}
		// A turn over store.value_threshold_bytes (64 KiB): its payload
		// is in Badger's value log, in the file Badger is writing.
		if _, err := c.Send(ctx, x.b, bigText(x.marker, 100<<10)); err != nil {
			t.Fatal(err)
		}
		proxied(t, s.url, x.b, "proxied "+x.marker)
		settle(t, c, x.b)
		if hits, err := c.Search(ctx, x.b, x.marker, 3, false); err != nil || len(hits) == 0 {
			t.Fatalf("search %s before the delete: %d hits, %v", x.marker, len(hits), err)
		}
	}
	if got := filesHolding(t, dir, gone); !slices.ContainsFunc(got, func(f string) bool { return strings.HasSuffix(f, ".vlog") }) {
		t.Fatalf("before the delete no value-log file holds the marker (files: %v): the scan cannot see it", got)
	} else {
		t.Logf("before the delete %s is in %v", gone, got)
	}
	res, err := c.DeleteSession(ctx, sg.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted: %+v", res)
	if len(res.Branches) != 1 || res.Turns != 5 || res.Nodes != 10 || res.Journals != 5 || res.ValueLogPending {
		t.Errorf("DeleteSession = %+v, want 1 branch, 5 turns, 10 nodes, 5 journals, the value log rewritten", res)
	}
	if got := filesHolding(t, dir, gone); len(got) > 0 {
		t.Errorf("after the DELETE the deleted marker is in %v", got)
	}
	if got := filesHolding(t, dir, kept); len(got) == 0 {
		t.Error("the kept session's marker is in no file: the scan sees nothing")
	}
	checkAfter := func(c *client.Client) {
		t.Helper()
		_, err := c.Branch(ctx, bg.ID)
		wantStatus(t, "GET the deleted branch", err, 404)
		_, _, err = c.History(ctx, bg.ID, messages.TurnID{}, 10)
		wantStatus(t, "history of the deleted branch", err, 404)
		_, err = c.Send(ctx, bg.ID, "back?")
		wantStatus(t, "a turn on the deleted branch", err, 404)
		_, err = c.DeleteSession(ctx, sg.ID)
		wantStatus(t, "DELETE again", err, 404)
		h, _, err := c.History(ctx, bk.ID, messages.TurnID{}, 20)
		if err != nil || len(h) != 10 || !strings.Contains(h[0].Message.RenderedText, kept) {
			t.Errorf("history of the kept session: %d entries, %v", len(h), err)
		}
		if hits, err := c.Search(ctx, bk.ID, kept, 3, false); err != nil || len(hits) == 0 {
			t.Errorf("search of the kept session: %d hits, %v", len(hits), err)
		}
	}
	checkAfter(c)
	s.stop(t)
	if got := filesHolding(t, dir, gone); len(got) > 0 {
		t.Errorf("after a stop the deleted marker is in %v", got)
	}
	s = startServe(t, dir, big)
	checkAfter(client.New(s.url))
	s.stop(t)
	if got := filesHolding(t, dir, gone); len(got) > 0 {
		t.Errorf("after a restart the deleted marker is in %v", got)
	}
	// The CLI on the data dir, no server.
	cmd := exec.Command(binary, "delete", "session", sk.ID.String())
	cmd.Env = env(dir)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "deleted session "+sk.ID.String()) {
		t.Fatalf("ctxinf delete session: %v\n%s", err, out)
	}
	if got := filesHolding(t, dir, kept); len(got) > 0 {
		t.Errorf("after ctxinf delete session the marker is in %v", got)
	}
}

// TestServeDeleteBranchForkRule: a session's first branch and a branch
// with forks are refused with 409 and keep everything; the fork, then its
// parent, are deleted (the CLI through --server for one), their markers
// leave every file, and the branch they were forked from keeps its turns.
func TestServeDeleteBranchForkRule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir)
	ctx := context.Background()
	c := client.New(s.url)
	base, forkMark, leafMark := uniqueMarker("BASE-"), uniqueMarker("FORK-"), uniqueMarker("LEAF-")
	_, main, err := c.CreateSession(ctx, "forks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, main.ID, "base "+base); err != nil {
		t.Fatal(err)
	}
	f1, err := c.Fork(ctx, main.ID, messages.NodeID{}, "f1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, f1.ID, "fork "+forkMark); err != nil {
		t.Fatal(err)
	}
	f2, err := c.Fork(ctx, f1.ID, messages.NodeID{}, "f2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, f2.ID, "leaf "+leafMark); err != nil {
		t.Fatal(err)
	}
	settle(t, c, f1.ID)
	settle(t, c, f2.ID)
	_, err = c.DeleteBranch(ctx, main.ID)
	wantStatus(t, "DELETE the first branch", err, 409)
	_, err = c.DeleteBranch(ctx, f1.ID)
	wantStatus(t, "DELETE a branch with a fork", err, 409)
	if err != nil && !strings.Contains(err.Error(), f2.ID.String()) {
		t.Errorf("the refusal does not name the fork: %v", err)
	}
	if h, _, err := c.History(ctx, f2.ID, messages.TurnID{}, 10); err != nil || len(h) != 6 {
		t.Fatalf("the leaf after the refusals: %d entries, %v", len(h), err)
	}
	cmd := exec.Command(binary, "delete", "branch", f2.ID.String(), "--server", s.url)
	cmd.Env = env(dir)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "deleted branch "+f2.ID.String()) {
		t.Fatalf("ctxinf delete branch --server: %v\n%s", err, out)
	}
	if got := filesHolding(t, dir, leafMark); len(got) > 0 {
		t.Errorf("after deleting the leaf its marker is in %v", got)
	}
	if got := filesHolding(t, dir, forkMark); len(got) == 0 {
		t.Error("the parent fork's marker went with the leaf (or the scan sees nothing)")
	}
	res, err := c.DeleteBranch(ctx, f1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Nodes != 2 {
		t.Errorf("DELETE f1 deleted %d nodes, want its own 2", res.Nodes)
	}
	if got := filesHolding(t, dir, forkMark); len(got) > 0 {
		t.Errorf("after deleting f1 its marker is in %v", got)
	}
	h, _, err := c.History(ctx, main.ID, messages.TurnID{}, 10)
	if err != nil || len(h) != 2 || !strings.Contains(h[0].Message.RenderedText, base) {
		t.Errorf("the first branch after its forks went: %d entries, %v", len(h), err)
	}
	if got := filesHolding(t, dir, base); len(got) == 0 {
		t.Error("the first branch's marker is in no file")
	}
	bs, err := c.Branches(ctx, main.Session)
	if err != nil || len(bs) != 1 {
		t.Errorf("branches left: %+v, %v", bs, err)
	}
	s.stop(t)
}

// TestServeDeleteAfterRestartLeavesNoByte: a value over the value-log
// threshold written before a restart (SIGTERM or SIGKILL), with and
// without encryption at rest, then its session deleted: the DELETE says
// the value log is rewritten only when no file holds the marker, and no
// file does after it, nor after another restart.
func TestServeDeleteAfterRestartLeavesNoByte(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kill bool
		enc  bool
	}{{"sigterm", false, false}, {"sigkill", true, false}, {"sigterm encrypted", false, true}, {"sigkill encrypted", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			envs := []string{"CTX_MODELS_LOCAL_CONTEXT_LIMIT=400000"}
			if tc.enc {
				envs = append(envs, "CTX_STORE_ENCRYPTION=true", "CTX_STORE_KEY="+randomHex(t, 32))
			}
			s := startServe(t, dir, envs...)
			ctx := context.Background()
			c := client.New(s.url)
			gone := uniqueMarker("GONE-")
			sg, bg, err := c.CreateSession(ctx, "restart then delete")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Send(ctx, bg.ID, "small "+gone); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Send(ctx, bg.ID, bigText(gone, 100<<10)); err != nil {
				t.Fatal(err)
			}
			settle(t, c, bg.ID)
			if tc.kill {
				_ = s.cmd.Process.Kill()
				<-s.done
			} else {
				s.stop(t)
			}
			if !tc.enc {
				if got := filesHolding(t, dir, gone); !slices.ContainsFunc(got, func(f string) bool { return strings.HasSuffix(f, ".vlog") }) {
					t.Fatalf("before the delete no value-log file holds the marker (files: %v): the scan cannot see it", got)
				}
			}
			s = startServe(t, dir, envs...)
			c = client.New(s.url)
			res, err := c.DeleteSession(ctx, sg.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := filesHolding(t, dir, gone)
			if len(got) > 0 && !res.ValueLogPending {
				t.Errorf("after the DELETE (value_log_pending false) the marker is in %v", got)
			} else if len(got) > 0 {
				t.Logf("after the DELETE (value_log_pending true) the marker is in %v", got)
			}
			s.stop(t)
			s = startServe(t, dir, envs...)
			s.stop(t)
			if got := filesHolding(t, dir, gone); len(got) > 0 {
				t.Errorf("after another restart the marker is in %v", got)
			}
		})
	}
}

// TestServeKillDuringDeleteLeavesNoByte: a SIGKILL 30 to 400 ms into a
// DELETE of a session whose turns hold a marker (one in the value log,
// each with its stream journal), with and without encryption at rest,
// then a restart: the session is gone (or, killed before its delete was
// durable, deleted again), and no file holds the marker, nor after
// another restart.
func TestServeKillDuringDeleteLeavesNoByte(t *testing.T) {
	t.Parallel()
	for i, delay := range []time.Duration{30 * time.Millisecond, 120 * time.Millisecond, 400 * time.Millisecond} {
		for _, enc := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s encrypted=%v", delay, enc), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				envs := []string{"CTX_MODELS_LOCAL_CONTEXT_LIMIT=400000"}
				if enc {
					envs = append(envs, "CTX_STORE_ENCRYPTION=true", "CTX_STORE_KEY="+randomHex(t, 32))
				}
				s := startServe(t, dir, envs...)
				ctx := context.Background()
				c := client.New(s.url)
				gone := uniqueMarker(fmt.Sprintf("GONE%d-", i))
				sg, bg, err := c.CreateSession(ctx, "killed delete")
				if err != nil {
					t.Fatal(err)
				}
				for j := range 3 {
					if _, err := c.Send(ctx, bg.ID, fmt.Sprintf("turn %d says %s", j, gone)); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := c.Send(ctx, bg.ID, bigText(gone, 100<<10)); err != nil {
					t.Fatal(err)
				}
				settle(t, c, bg.ID)
				go func() { _, _ = c.DeleteSession(ctx, sg.ID) }()
				time.Sleep(delay) // the kill's moment in the delete, as a user's
				_ = s.cmd.Process.Kill()
				<-s.done

				s = startServe(t, dir, envs...)
				c = client.New(s.url)
				if _, err := c.DeleteSession(ctx, sg.ID); err != nil {
					var ce *client.Error
					if !errors.As(err, &ce) || ce.Status != 404 {
						t.Fatalf("DELETE after the restart: %v, want it done or 404", err)
					}
				}
				s.stop(t)
				if got := filesHolding(t, dir, gone); len(got) > 0 {
					t.Errorf("after the killed delete and a restart the marker is in %v", got)
				}
				s = startServe(t, dir, envs...)
				s.stop(t)
				if got := filesHolding(t, dir, gone); len(got) > 0 {
					t.Errorf("after another restart the marker is in %v", got)
				}
			})
		}
	}
}

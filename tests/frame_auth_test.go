package tests

import (
	"bytes"
	"context"
	le "encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	framec "github.com/contextinfinity/ctxinf/client/frame"
	wire "github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// postAuth POSTs body as JSON with a bearer token and decodes the answer
// into out; it returns the status.
func postAuth(t *testing.T, url, token string, body, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("POST %s: %d %q: %v", url, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

// rawFrames sends b on a new TCP connection to addr and returns every
// byte the server sends until it closes the connection, and the error
// that ended the read (nil: the server closed it).
func rawFrames(t *testing.T, addr string, b []byte) ([]byte, error) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Bounds a server that never closes; a passing run never waits on it.
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	return io.ReadAll(nc)
}

func frameBytes(reqID uint64, r wire.Request) []byte {
	b, tail := wire.EncodeRequest(nil, reqID, r)
	return append(b, tail...)
}

// With tokens set, the frame port (on by default) serves nothing to a
// client without one: a script that pipelines reads, a fork and blob
// fetches behind no HELLO, a HELLO without a token or one with a wrong
// token gets a single UNAUTHENTICATED error frame and a closed
// connection — no byte of the conversation, no fork made. The Go client
// with one of the tokens is served.
func TestServeFramePortRequiresToken(t *testing.T) {
	t.Parallel()
	const tokens = "tok-alpha-1,tok-beta-2"
	s := startServe(t, t.TempDir(), "CTX_SERVER_TOKENS="+tokens)
	ctx := context.Background()

	var created struct {
		Branch struct{ ID messages.BranchID }
	}
	if st := postAuth(t, s.url+"/v1/sessions", "tok-alpha-1", map[string]string{"title": "secret"}, &created); st != 200 && st != 201 {
		t.Fatalf("create session: %d", st)
	}
	b := created.Branch.ID
	marker := "FRAMEAUTH-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-marker"
	if st := postAuth(t, s.url+"/v1/branches/"+b.String()+"/turns", "tok-alpha-1", map[string]string{"text": "remember " + marker}, nil); st != 200 {
		t.Fatalf("turn: %d", st)
	}

	// The token holder sees the conversation through the frame port: the
	// marker is there to be stolen (polled: the turn reaches the store's
	// DAG when it commits).
	good, err := framec.DialOptions(ctx, s.frame, framec.Options{Token: "tok-beta-2", Name: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	var hashes []persistence.Hash
	deadline := time.Now().Add(20 * time.Second)
	for {
		hashes = nil
		found := false
		page, err := good.GetLast(ctx, b, 64)
		if err != nil {
			t.Fatalf("GetLast with the token: %v", err)
		}
		for _, tr := range page.Nodes {
			hashes = append(hashes, tr.PayloadHash)
			p, err := good.GetBlob(ctx, tr.PayloadHash)
			if err != nil {
				t.Fatalf("GetBlob with the token: %v", err)
			}
			found = found || bytes.Contains(p, []byte(marker))
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the marker is in none of the branch's %d turns", len(page.Nodes))
		}
		time.Sleep(20 * time.Millisecond)
	}
	headBefore, err := good.Head(ctx, b)
	if err != nil {
		t.Fatal(err)
	}

	// What a script without credentials pipelines: read the branch, fork
	// it and create a branch under ids of its choosing, fetch every payload.
	var forks []messages.BranchID
	attack := func(firstID uint64) []byte {
		fork := messages.NewID[messages.BranchID](time.Now())
		made := messages.NewID[messages.BranchID](time.Now())
		forks = append(forks, fork, made)
		out := bytes.Join([][]byte{
			frameBytes(firstID, wire.LastRequest{Branch: b, Limit: 64}),
			frameBytes(firstID+1, wire.ForkRequest{Branch: fork, Source: b}),
			frameBytes(firstID+2, wire.CreateRequest{Branch: made}),
			frameBytes(firstID+3, wire.HeadRequest{Branch: b}),
		}, nil)
		for i, h := range hashes {
			out = append(out, frameBytes(firstID+4+uint64(i), wire.BlobRequest{Hash: h})...)
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		first []byte
	}{
		{"no HELLO", nil},
		{"HELLO without a token", frameBytes(1, wire.Hello{Version: 1, Name: "script"})},
		{"HELLO with an empty token", frameBytes(1, wire.Hello{Version: wire.Version, Name: "script"})},
		{"HELLO with a wrong token", frameBytes(1, wire.Hello{Version: wire.Version, Name: "script", Token: "tok-alpha-2"})},
	} {
		firstID := uint64(1)
		if tt.first == nil {
			firstID = 100
		}
		got, err := rawFrames(t, s.frame, append(tt.first, attack(100)...))
		if bytes.Contains(got, []byte(marker)) {
			t.Fatalf("%s: the marker is in the %d bytes the server sent", tt.name, len(got))
		}
		if err != nil {
			t.Fatalf("%s: the server did not close the connection: %v (got %d bytes: %x)", tt.name, err, len(got), got)
		}
		// Exactly one frame: ERROR for the first frame, UNAUTHENTICATED.
		if len(got) < wire.HeaderSize {
			t.Fatalf("%s: got %d bytes (%x), want an ERROR frame", tt.name, len(got), got)
		}
		n := le.LittleEndian.Uint32(got[0:])
		typ := le.LittleEndian.Uint16(got[4:])
		reqID := le.LittleEndian.Uint64(got[8:])
		if typ != 0xFFFF || reqID != firstID || len(got) != wire.HeaderSize+int(n) {
			t.Fatalf("%s: got type %#04x req %d, %d bytes for a %d-byte payload; want one ERROR frame for req %d and nothing else",
				tt.name, typ, reqID, len(got), n, firstID)
		}
		if code := le.LittleEndian.Uint16(got[wire.HeaderSize:]); code != 0x0105 {
			t.Fatalf("%s: error code %#04x, want 0x0105 (UNAUTHENTICATED): %q", tt.name, code, got[wire.HeaderSize:])
		}
	}

	// Nothing was forked, created or moved.
	for _, f := range forks {
		if _, err := good.Head(ctx, f); !errors.Is(err, persistence.ErrBranchNotFound) {
			t.Fatalf("branch %s asked for without a token: Head = %v, want ErrBranchNotFound", f, err)
		}
	}
	if h, err := good.Head(ctx, b); err != nil || h.Node != headBefore.Node {
		t.Fatalf("head after the attempts = %+v, %v; want %s", h, err, headBefore.Node)
	}

	// The Go client without a token, or with a wrong one, is refused.
	for _, tok := range []string{"", "tok-beta-3", tokens} {
		c, err := framec.DialOptions(ctx, s.frame, framec.Options{Token: tok})
		if err == nil {
			c.Close()
			t.Fatalf("frame client with token %q was served", tok)
		}
		if !errors.Is(err, framec.ErrUnauthenticated) {
			t.Fatalf("frame client with token %q: %v, want ErrUnauthenticated", tok, err)
		}
	}
	// With the token, a fork works (the attempts above were refused, not broken).
	fork := messages.NewID[messages.BranchID](time.Now())
	if h, err := good.Fork(ctx, framec.ForkSpec{ID: fork, Source: b}); err != nil || h.Node != headBefore.Node {
		t.Fatalf("Fork with the token = %+v, %v", h, err)
	}
	s.stop(t)
}

// Without tokens the frame port stays on loopback, as the HTTP API does:
// `serve` with server.frame_addr beyond loopback exits non-zero naming
// server.frame_addr and server.tokens_env. With tokens it serves there.
func TestServeFramePortBeyondLoopback(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, binary, "serve", "--addr", "127.0.0.1:"+strconv.Itoa(freePort(t)))
		cmd.Env = env(dir, "CTX_SERVER_TOKENS=", "CTX_SERVER_FRAME_ADDR="+addr)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() <= 0 {
			t.Fatalf("serve with frame_addr %s and no tokens: %v, want a non-zero exit\n%s", addr, err, stderr.String())
		}
		if msg := stderr.String(); !strings.Contains(msg, "server.frame_addr") || !strings.Contains(msg, "server.tokens_env") ||
			!strings.Contains(msg, "loopback") {
			t.Fatalf("serve with frame_addr %s and no tokens said %q; want it to name server.frame_addr, server.tokens_env and loopback", addr, msg)
		}
	}

	port := strconv.Itoa(freePort(t))
	s := startServe(t, t.TempDir(), "CTX_SERVER_TOKENS=tok-wide", "CTX_SERVER_FRAME_ADDR=0.0.0.0:"+port)
	c, err := framec.DialOptions(context.Background(), "127.0.0.1:"+port, framec.Options{Token: "tok-wide"})
	if err != nil {
		t.Fatalf("frame port on 0.0.0.0 with tokens: %v", err)
	}
	if _, err := c.CreateBranch(context.Background(), persistence.BranchSpec{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := framec.Dial(context.Background(), "127.0.0.1:"+port); !errors.Is(err, framec.ErrUnauthenticated) {
		t.Fatalf("frame port on 0.0.0.0 without a token: %v, want ErrUnauthenticated", err)
	}
	s.stop(t)
}

package tests

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	framec "github.com/contextinfinity/ctxinf/client/frame"
	wire "github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The frame port is scoped by tenant, on the real binary with two
// tenants' tokens from the environment (and no token of the default
// tenant's): tenant acme writes a marker in a turn over HTTP and reads
// it back through the frame port with its token; tenant beta's token on
// the frame port names acme's branch, its turns and its payloads in every
// kind of request and gets the answer of an id that does not exist, no
// byte of the marker, and forks, creates and appends nothing.
func TestServeFramePortTenants(t *testing.T) {
	t.Parallel()
	const acme, beta = "tok-frame-acme-1", "tok-frame-beta-1"
	s := startServe(t, t.TempDir(), "CTX_SERVER_TENANTS=acme=CTX_T_ACME_TOKENS,beta=CTX_T_BETA_TOKENS",
		"CTX_T_ACME_TOKENS="+acme, "CTX_T_BETA_TOKENS="+beta)
	ctx := context.Background()

	var created struct {
		Branch struct{ ID messages.BranchID }
	}
	if st := postAuth(t, s.url+"/v1/sessions", acme, map[string]string{"title": "acme's"}, &created); st != 200 && st != 201 {
		t.Fatalf("create session: %d", st)
	}
	b := created.Branch.ID
	marker := "FRAMETENANT-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-marker"
	if st := postAuth(t, s.url+"/v1/branches/"+b.String()+"/turns", acme, map[string]string{"text": "remember " + marker}, nil); st != 200 {
		t.Fatalf("turn: %d", st)
	}

	// acme's token reads the marker through the frame port (polled: the
	// turn reaches the store's DAG when it commits).
	a, err := framec.DialOptions(ctx, s.frame, framec.Options{Token: acme, Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var page persistence.Page
	deadline := time.Now().Add(20 * time.Second)
	for found := false; !found; {
		if page, err = a.GetLast(ctx, b, 64); err != nil {
			t.Fatalf("acme GET_LAST on its branch: %v", err)
		}
		for _, tr := range page.Nodes {
			p, err := a.GetBlob(ctx, tr.PayloadHash)
			if err != nil {
				t.Fatalf("acme GET_BLOB: %v", err)
			}
			found = found || bytes.Contains(p, []byte(marker))
		}
		if !found && time.Now().After(deadline) {
			t.Fatalf("the marker is in none of the branch's %d turns read by acme", len(page.Nodes))
		}
		if !found {
			time.Sleep(20 * time.Millisecond)
		}
	}
	head, err := a.Head(ctx, b)
	if err != nil {
		t.Fatal(err)
	}

	// beta, on one connection: every request names acme's.
	nc, err := net.Dial("tcp", s.frame)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second)) // bounds a broken server only
	fork, made := messages.NewID[messages.BranchID](time.Now()), messages.NewID[messages.BranchID](time.Now())
	first, last := page.Nodes[0], page.Nodes[len(page.Nodes)-1]
	reqs := []wire.Request{
		wire.Hello{Version: wire.Version, Name: "beta", Token: beta},
		wire.LastRequest{Branch: b, Limit: 64},
		wire.HeadRequest{Branch: b},
		wire.ForkRequest{Branch: fork, Source: b},
		wire.ForkRequest{Branch: fork, At: last.ID},
		wire.CreateRequest{Branch: made, At: first.ID},
		wire.AppendRequest{Branch: b, Payload: []byte("beta was here")},
		wire.BeforeRequest{Before: last.ID, Limit: 64},
		wire.RangeRequest{Branch: b, Limit: 64},
	}
	for _, tr := range page.Nodes {
		reqs = append(reqs, wire.BlobRequest{Hash: tr.PayloadHash})
	}
	var out []byte
	for i, r := range reqs {
		out = append(out, frameBytes(uint64(i+1), r)...)
	}
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	rd := wire.NewReader(nc, 64<<10)
	var got []byte
	for range reqs {
		h, err := rd.ReadHeader()
		if err != nil {
			t.Fatalf("beta: read an answer: %v (after %d bytes)", err, len(got))
		}
		p, err := rd.ReadPayload(h)
		if err != nil {
			t.Fatal(err)
		}
		got = append(append(got, wire.AppendHeader(nil, h)...), p...)
		if h.ReqID == 1 {
			if h.Type != wire.MsgHello.Response() {
				t.Fatalf("beta's HELLO: answer %s", h.Type)
			}
			continue
		}
		req := reqs[h.ReqID-1]
		if h.Type != wire.MsgError {
			t.Fatalf("beta's %s on acme's: answer %s, want a not-found ERROR", req.Type(), h.Type)
		}
		e, err := wire.DecodeError(p)
		if err != nil {
			t.Fatal(err)
		}
		if e.Code != wire.CodeBranchNotFound && e.Code != wire.CodeTurnNotFound && e.Code != wire.CodeBlobNotFound {
			t.Fatalf("beta's %s on acme's: %v, want a not-found code", req.Type(), e)
		}
	}
	if bytes.Contains(got, []byte(marker)) {
		t.Fatalf("the marker is in the %d bytes beta received", len(got))
	}

	// beta's answer for acme's branch is the answer for a random one.
	bc, err := framec.DialOptions(ctx, s.frame, framec.Options{Token: beta, Name: "beta"})
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	rnd := messages.NewID[messages.BranchID](time.Now())
	_, errA := bc.GetLast(ctx, b, 64)
	_, errR := bc.GetLast(ctx, rnd, 64)
	var fa, fr *wire.Error
	if !errors.As(errA, &fa) || !errors.As(errR, &fr) || fa.Code != fr.Code ||
		string(bytes.ReplaceAll([]byte(fa.Message), []byte(b.String()), []byte(rnd.String()))) != fr.Message {
		t.Fatalf("beta's GET_LAST: acme's branch %v, a random one %v; want the same answer", errA, errR)
	}

	// Nothing was forked, created or appended: beta does not find the
	// branches it asked for (they would be its own), acme's head is
	// where it was.
	for _, id := range []messages.BranchID{fork, made} {
		if _, err := bc.Head(ctx, id); !errors.Is(err, persistence.ErrBranchNotFound) {
			t.Fatalf("branch %s beta asked for: Head = %v, want ErrBranchNotFound", id, err)
		}
	}
	if h, err := a.Head(ctx, b); err != nil || h.Node != head.Node {
		t.Fatalf("acme's head after beta's attempts = %+v, %v; want %s", h, err, head.Node)
	}
	// beta's own branch works, and acme does not see it.
	own, err := bc.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatalf("beta creates a branch: %v", err)
	}
	if _, err := bc.Append(ctx, own.Branch, persistence.AppendRequest{Payload: []byte("beta's own")}); err != nil {
		t.Fatalf("beta appends to its branch: %v", err)
	}
	if _, err := a.Head(ctx, own.Branch); !errors.Is(err, persistence.ErrBranchNotFound) {
		t.Fatalf("acme reads beta's branch: %v, want ErrBranchNotFound", err)
	}
}

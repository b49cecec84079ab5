package frame_test

import (
	"bytes"
	"testing"
	"time"

	client "github.com/contextinfinity/ctxinf/client/frame"
	"github.com/contextinfinity/ctxinf/internal/auth"
	"github.com/contextinfinity/ctxinf/internal/server/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// tenantServer serves db with three tenants' tokens: "tok-d" (the
// default tenant), "tok-a" (acme) and "tok-b" (globex), scoped by
// tenant.
func tenantServer(t *testing.T, db persistence.Database) *frame.Server {
	t.Helper()
	table, err := auth.New([]string{"tok-d"}, []auth.Tenant{{Name: "acme", Tokens: []string{"tok-a"}}, {Name: "globex", Tokens: []string{"tok-b"}}})
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, db, frame.Options{Authenticate: frame.TableAuth(table), Tenancy: db})
}

// helloAs opens a raw connection authenticated with token.
func helloAs(t *testing.T, s *frame.Server, token string) *rawConn {
	t.Helper()
	c := rawDial(t, s)
	c.send(req(1, frame.Hello{Version: frame.TokenVersion, Token: token}))
	if h, _ := c.read(); h.Type != frame.MsgHello.Response() {
		t.Fatalf("HELLO as %q: answer %s", token, h.Type)
	}
	return c
}

// rawAnswer sends r and returns its whole answer frame, as sent.
func rawAnswer(c *rawConn, reqID uint64, r frame.Request) []byte {
	c.t.Helper()
	c.send(req(reqID, r))
	h, p := c.read()
	if h.ReqID != reqID {
		c.t.Fatalf("answer to req %d has req_id %d", reqID, h.ReqID)
	}
	return append(frame.AppendHeader(nil, h), p...)
}

// TestTenancyScopesEveryFrame: a connection of one tenant names another
// tenant's branch, turn or blob in every kind of frame and gets exactly
// the answer a random id gets (byte for byte, but for the id in the
// message), and changes nothing; its own branches, forks included, work,
// and a fork is its parent's tenant's.
func TestTenancyScopesEveryFrame(t *testing.T) {
	ctx := t.Context()
	db := openDB(t)
	s := tenantServer(t, db)
	now := time.Now()

	// acme's branch through the frame port, with a fork, and a branch
	// of an acme session of the runtime's (a branch row, its root's
	// turn row), and a branch of the default tenant's from before tenants.
	a := dial(t, s, client.Options{Token: "tok-a"})
	ha, err := a.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	ta1, err := a.Append(ctx, ha.Branch, persistence.AppendRequest{Payload: []byte("acme secret one")})
	if err != nil {
		t.Fatal(err)
	}
	ta2, err := a.Append(ctx, ha.Branch, persistence.AppendRequest{Payload: []byte("acme secret two")})
	if err != nil {
		t.Fatal(err)
	}
	fork, err := a.Fork(ctx, client.ForkSpec{Source: ha.Branch})
	if err != nil {
		t.Fatalf("acme forks its own branch: %v", err)
	}
	if _, err := a.Append(ctx, fork.Branch, persistence.AppendRequest{Payload: []byte("on the fork")}); err != nil {
		t.Fatalf("acme appends to its fork: %v", err)
	}
	atFork, err := a.Fork(ctx, client.ForkSpec{At: ta1.ID})
	if err != nil {
		t.Fatalf("acme forks at its own turn: %v", err)
	}
	for _, b := range []messages.BranchID{ha.Branch, fork.Branch, atFork.Branch} {
		if tn, err := db.BranchTenant(ctx, b); err != nil || tn != "acme" {
			t.Fatalf("BranchTenant(%s) = %q, %v; want acme (a fork is its parent's tenant's)", b, tn, err)
		}
	}
	sess, rb, root := messages.NewID[messages.SessionID](now), messages.NewID[messages.BranchID](now), messages.NewID[messages.TurnID](now)
	if _, err := db.Commit(ctx, &persistence.Tx{
		NewBranches: []persistence.BranchSpec{{ID: rb}},
		Appends:     []persistence.TxAppend{{Branch: rb, ID: root, Req: persistence.AppendRequest{Payload: []byte("acme runtime turn")}}},
		Sessions:    []persistence.SessionRow{{ID: sess, ActiveBranch: rb, Created: now, Tenant: "acme"}},
		Branches:    []persistence.BranchRow{{ID: rb, Session: sess, Created: now}},
		NewTurns:    []persistence.TurnRow{{Branch: rb, Seq: 1, ID: root, Phase: messages.PhaseAccepted, Updated: now}},
	}); err != nil {
		t.Fatal(err)
	}
	legacy, err := db.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	legacyTurn, err := db.Append(ctx, legacy.Branch, persistence.AppendRequest{Payload: []byte("default tenant's")})
	if err != nil {
		t.Fatal(err)
	}
	// acme reads its runtime branch and forks at its root turn.
	if _, err := a.GetBefore(ctx, root, 10); err != nil {
		t.Fatalf("acme GET_BEFORE on its runtime turn: %v", err)
	}
	if _, err := a.Fork(ctx, client.ForkSpec{At: root}); err != nil {
		t.Fatalf("acme forks at its runtime turn: %v", err)
	}

	b := helloAs(t, s, "tok-b")
	rndB, rndT := messages.NewID[messages.BranchID](now), messages.NewID[messages.TurnID](now)
	var rndH persistence.Hash
	copy(rndH[:], bytes.Repeat([]byte{0x5a}, 32))
	for _, tc := range []struct {
		name            string
		foreign, random frame.Request
		id, rnd         string // what the message names
	}{
		{"CTX_CREATE at", frame.CreateRequest{At: ta1.ID}, frame.CreateRequest{At: rndT}, ta1.ID.String(), rndT.String()},
		{"CTX_FORK source", frame.ForkRequest{Source: ha.Branch}, frame.ForkRequest{Source: rndB}, ha.Branch.String(), rndB.String()},
		{"CTX_FORK source runtime", frame.ForkRequest{Source: rb}, frame.ForkRequest{Source: rndB}, rb.String(), rndB.String()},
		{"CTX_FORK at", frame.ForkRequest{At: ta2.ID}, frame.ForkRequest{At: rndT}, ta2.ID.String(), rndT.String()},
		{"CTX_FORK at runtime root", frame.ForkRequest{At: root}, frame.ForkRequest{At: rndT}, root.String(), rndT.String()},
		{"CTX_FORK at default", frame.ForkRequest{At: legacyTurn.ID}, frame.ForkRequest{At: rndT}, legacyTurn.ID.String(), rndT.String()},
		{"GET_HEAD", frame.HeadRequest{Branch: ha.Branch}, frame.HeadRequest{Branch: rndB}, ha.Branch.String(), rndB.String()},
		{"GET_HEAD fork", frame.HeadRequest{Branch: fork.Branch}, frame.HeadRequest{Branch: rndB}, fork.Branch.String(), rndB.String()},
		{"GET_HEAD default", frame.HeadRequest{Branch: legacy.Branch}, frame.HeadRequest{Branch: rndB}, legacy.Branch.String(), rndB.String()},
		{"APPEND_TURN", frame.AppendRequest{Branch: ha.Branch, Payload: []byte("x")}, frame.AppendRequest{Branch: rndB, Payload: []byte("x")}, ha.Branch.String(), rndB.String()},
		{"APPEND_TURN empty", frame.AppendRequest{Branch: ha.Branch}, frame.AppendRequest{Branch: rndB}, ha.Branch.String(), rndB.String()},
		{"GET_LAST", frame.LastRequest{Branch: ha.Branch, Limit: 10}, frame.LastRequest{Branch: rndB, Limit: 10}, ha.Branch.String(), rndB.String()},
		{"GET_LAST runtime", frame.LastRequest{Branch: rb, Limit: 10}, frame.LastRequest{Branch: rndB, Limit: 10}, rb.String(), rndB.String()},
		{"GET_BEFORE", frame.BeforeRequest{Before: ta2.ID, Limit: 10}, frame.BeforeRequest{Before: rndT, Limit: 10}, ta2.ID.String(), rndT.String()},
		{"GET_BEFORE runtime", frame.BeforeRequest{Before: root, Limit: 10}, frame.BeforeRequest{Before: rndT, Limit: 10}, root.String(), rndT.String()},
		{"GET_RANGE_BY_DEPTH", frame.RangeRequest{Branch: ha.Branch, Limit: 10}, frame.RangeRequest{Branch: rndB, Limit: 10}, ha.Branch.String(), rndB.String()},
		{"GET_BLOB", frame.BlobRequest{Hash: ta1.PayloadHash}, frame.BlobRequest{Hash: rndH}, ta1.PayloadHash.String(), rndH.String()},
	} {
		got := rawAnswer(b, 7, tc.foreign)
		want := rawAnswer(b, 7, tc.random)
		h, err := frame.ParseHeader(got)
		p := got[frame.HeaderSize:]
		if err != nil || h.Type != frame.MsgError {
			t.Fatalf("%s on acme's: answer %s, %v; want an ERROR", tc.name, h.Type, err)
		}
		e, err := frame.DecodeError(p)
		if err != nil || (e.Code != frame.CodeBranchNotFound && e.Code != frame.CodeTurnNotFound && e.Code != frame.CodeBlobNotFound) {
			t.Fatalf("%s on acme's: %v, %v; want a not-found code", tc.name, e, err)
		}
		if g := bytes.ReplaceAll(got, []byte(tc.id), []byte(tc.rnd)); !bytes.Equal(g, want) {
			t.Errorf("%s: acme's id answered\n%q\nwant the answer of a random id\n%q", tc.name, got, want)
		}
		for _, secret := range []string{"acme secret", "acme runtime", "on the fork"} {
			if bytes.Contains(got, []byte(secret)) {
				t.Errorf("%s: the answer holds %q", tc.name, secret)
			}
		}
	}
	// Nothing of acme's changed, nothing of it was forked.
	if p, err := a.GetLast(ctx, ha.Branch, 10); err != nil || len(p.Nodes) != 2 {
		t.Fatalf("acme's branch after globex's attempts: %d turns, %v; want 2", len(p.Nodes), err)
	}

	// globex's own branch works, and its blobs once sent to it.
	gb := dial(t, s, client.Options{Token: "tok-b"})
	hb, err := gb.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := gb.Append(ctx, hb.Branch, persistence.AppendRequest{Payload: []byte("globex payload")})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := gb.GetBlob(ctx, tb.PayloadHash); err != nil || string(p) != "globex payload" {
		t.Fatalf("globex GET_BLOB of its own appended payload: %q, %v", p, err)
	}
	if tn, err := db.TurnTenant(ctx, tb.ID); err != nil || tn != "globex" {
		t.Fatalf("TurnTenant(globex's root) = %q, %v", tn, err)
	}
	// A new connection must be sent a turn before its blob.
	gb2 := dial(t, s, client.Options{Token: "tok-b"})
	if _, err := gb2.GetBlob(ctx, tb.PayloadHash); err == nil {
		t.Fatal("GET_BLOB of a hash the connection was not sent: answered")
	} else {
		wantCode(t, "GET_BLOB unseen", err, frame.CodeBlobNotFound, persistence.ErrBlobNotFound)
	}
	if _, err := gb2.GetLast(ctx, hb.Branch, 1); err != nil {
		t.Fatal(err)
	}
	if p, err := gb2.GetBlob(ctx, tb.PayloadHash); err != nil || string(p) != "globex payload" {
		t.Fatalf("globex GET_BLOB after GET_LAST: %q, %v", p, err)
	}

	// acme reads its own payloads; the default tenant's token sees the
	// default tenant's branch and none of acme's.
	if p, err := a.GetLast(ctx, ha.Branch, 10); err != nil || len(p.Nodes) != 2 {
		t.Fatal(err)
	} else if blob, err := a.GetBlob(ctx, p.Nodes[0].PayloadHash); err != nil || string(blob) != "acme secret one" {
		t.Fatalf("acme GET_BLOB: %q, %v", blob, err)
	}
	d := dial(t, s, client.Options{Token: "tok-d"})
	if _, err := d.GetLast(ctx, legacy.Branch, 10); err != nil {
		t.Fatalf("default tenant on its branch: %v", err)
	}
	if _, err := d.GetLast(ctx, ha.Branch, 10); err == nil {
		t.Fatal("default tenant read acme's branch")
	}
}

// TestNoTenancyUnchanged: without Tenancy, any token sees every branch
// and GET_BLOB answers any hash, as before tenants.
func TestNoTenancyUnchanged(t *testing.T) {
	ctx := t.Context()
	db := openDB(t)
	table, _ := auth.New(nil, []auth.Tenant{{Name: "acme", Tokens: []string{"tok-a"}}, {Name: "globex", Tokens: []string{"tok-b"}}})
	s := startServer(t, db, frame.Options{Authenticate: frame.TableAuth(table)})
	a := dial(t, s, client.Options{Token: "tok-a"})
	h, err := a.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := a.Append(ctx, h.Branch, persistence.AppendRequest{Payload: []byte("shared")})
	if err != nil {
		t.Fatal(err)
	}
	b := dial(t, s, client.Options{Token: "tok-b"})
	if p, err := b.GetLast(ctx, h.Branch, 10); err != nil || len(p.Nodes) != 1 {
		t.Fatalf("GET_LAST without tenancy: %v", err)
	}
	if p, err := b.GetBlob(ctx, tr.PayloadHash); err != nil || string(p) != "shared" {
		t.Fatalf("GET_BLOB without tenancy: %q, %v", p, err)
	}
}

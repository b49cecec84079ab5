package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/api"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/internal/core"
	"github.com/contextinfinity/ctxinf/messages"
)

// Every list route answers pages of the caller's tenant's rows: each row
// once across the pages, in order, another tenant's never; a bad limit,
// cursor or order is refused naming the parameter.
func TestListPages(t *testing.T) {
	t.Parallel()
	ts := newTenantServer(t)
	ctx := context.Background()
	var acme []messages.SessionID
	for i := range 7 {
		s, _, err := ts.rt.CreateSessionFor(ctx, "acme", fmt.Sprint("acme ", i))
		if err != nil {
			t.Fatal(err)
		}
		acme = append(acme, s.ID)
		if _, _, err := ts.rt.CreateSessionFor(ctx, "beta", "beta"); err != nil {
			t.Fatal(err)
		}
	}
	c := client.New(ts.URL, client.WithToken(tokAcme))

	for _, newest := range []bool{false, true} {
		var got []messages.SessionID
		p := client.Page{Limit: 3, Newest: newest}
		for pages := 0; ; pages++ {
			l, err := c.SessionPage(ctx, p)
			if err != nil || len(l.Sessions) > 3 || pages > 3 {
				t.Fatalf("SessionPage(%+v) = %+v, %v", p, l, err)
			}
			for _, s := range l.Sessions {
				got = append(got, s.ID)
			}
			if l.Next == "" {
				break
			}
			p.Cursor = l.Next
		}
		want := slices.Clone(acme)
		if newest {
			slices.Reverse(want)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pages by 3 (newest %v) = %v, want acme's %v", newest, got, want)
		}
	}
	all, err := c.Sessions(ctx)
	if err != nil || len(all) != len(acme) {
		t.Fatalf("Sessions() = %d sessions, %v; want acme's %d", len(all), err, len(acme))
	}
	if s, err := c.Session(ctx, acme[2]); err != nil || s.ID != acme[2] {
		t.Fatalf("Session() = %+v, %v", s, err)
	}
	beta, _ := client.New(ts.URL, client.WithToken(tokBeta)).Sessions(ctx)
	if _, err := c.Session(ctx, beta[0].ID); !client.IsNotFound(err) {
		t.Fatalf("another tenant's Session() err = %v, want not found", err)
	}

	// Branches and pins page the same way.
	if _, err := c.Record(ctx, all[0].ActiveBranch, "hello", "hi"); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := c.Fork(ctx, all[0].ActiveBranch, messages.NodeID{}, ""); err != nil {
			t.Fatal(err)
		}
	}
	var branches []messages.BranchID
	for p := (client.Page{Limit: 2}); ; {
		l, err := c.BranchPage(ctx, acme[0], p)
		if err != nil || len(l.Branches) > 2 {
			t.Fatalf("BranchPage() = %+v, %v", l, err)
		}
		for _, b := range l.Branches {
			branches = append(branches, b.ID)
		}
		if p.Cursor = l.Next; p.Cursor == "" {
			break
		}
	}
	if bs, _ := c.Branches(ctx, acme[0]); len(branches) != 5 || !slices.Equal(branches, idsOf(bs)) {
		t.Fatalf("branches by 2 = %v, want the 5 of Branches %v", branches, idsOf(bs))
	}
	for i := range 5 {
		if _, err := c.Pin(ctx, all[0].ActiveBranch, fmt.Sprint("fact ", i)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.PinPage(ctx, all[0].ActiveBranch, client.Page{Limit: 2})
	if err != nil || len(l.Pins) != 2 || l.Next == "" {
		t.Fatalf("PinPage(2) = %+v, %v", l, err)
	}
	l, err = c.PinPage(ctx, all[0].ActiveBranch, client.Page{Limit: 3, Cursor: l.Next})
	if err != nil || len(l.Pins) != 3 || l.Next != "" || l.Pins[0].Fact != "fact 2" {
		t.Fatalf("PinPage(3, after 2) = %+v, %v", l, err)
	}

	pinsPage, _ := c.PinPage(ctx, all[0].ActiveBranch, client.Page{Limit: 1})

	// Inspect's pages are of sessions, with their branches.
	rep, err := c.InspectPage(ctx, 0, client.Page{Limit: 4})
	if err != nil || len(rep.Sessions) != 4 || rep.Next == "" || len(rep.Sessions[0].Branches) != 5 {
		t.Fatalf("InspectPage(4) = %d sessions, next %q, %v", len(rep.Sessions), rep.Next, err)
	}
	if rep, err = c.Inspect(ctx, 0); err != nil || len(rep.Sessions) != len(acme) {
		t.Fatalf("Inspect() = %d sessions, %v", len(rep.Sessions), err)
	}

	bad := []struct{ path, want string }{
		{"/v1/sessions?limit=0", "limit: \"0\", want an integer from 1 to 1000"},
		{"/v1/sessions?limit=1001", "limit: \"1001\", want an integer from 1 to 1000"},
		{"/v1/sessions?cursor=zz", "cursor: \"zz\" is not a cursor of this listing"},
		{"/v1/sessions?order=sideways", "order: \"sideways\", want oldest (the default) or newest"},
		{"/v1/sessions/" + acme[0].String() + "/branches?limit=x", "limit: \"x\", want an integer from 1 to 1000"},
		{"/v1/branches/" + all[0].ActiveBranch.String() + "/pins?limit=5000", "limit: \"5000\", want an integer from 1 to 1000"},
		{"/v1/inspect?limit=-1", "limit: \"-1\", want an integer from 1 to 1000"},
		{"/v1/branches/" + all[0].ActiveBranch.String() + "/pending?limit=1001", "limit: \"1001\", want an integer from 1 to 1000"},
		{"/v1/branches/" + all[0].ActiveBranch.String() + "/pending?cursor=" + url.QueryEscape(pinsPage.Next), "cursor: "},
	}
	first, _ := c.SessionPage(ctx, client.Page{Limit: 1})
	bad = append(bad,
		struct{ path, want string }{"/v1/sessions/" + acme[0].String() + "/branches?cursor=" + url.QueryEscape(first.Next), "cursor: "},
		struct{ path, want string }{"/v1/sessions?order=newest&cursor=" + url.QueryEscape(first.Next), "order: \"newest\", but the cursor is of a page in the other order"})
	for _, b := range bad {
		st, body, _ := ts.send(t, tokAcme, "GET", b.path, "")
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal([]byte(body), &e)
		if st != 400 || e.Error.Code != api.CodeInvalid || !strings.Contains(e.Error.Message, b.want) {
			t.Errorf("GET %s = %d %s, want 400 naming %q", b.path, st, body, b.want)
		}
	}
}

// A branch's pending turns page oldest first, by seq, each once.
func TestPendingPages(t *testing.T) {
	t.Parallel()
	ts := newTestServerWith(t, Options{}, 0, func(c *actors.Config) { c.Fold = &core.Policy{K: 1000, B: 1000} })
	ctx := context.Background()
	c := client.New(ts.URL)
	_, b, err := c.CreateSession(ctx, "pending")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.Record(ctx, b.ID, fmt.Sprint("question ", i), "answer"); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []uint64
	for p := (client.Page{Limit: 2}); ; {
		l, err := c.PendingPage(ctx, b.ID, p)
		if err != nil || len(l.Pending) > 2 || len(seqs) > 5 {
			t.Fatalf("PendingPage(%+v) = %+v, %v", p, l, err)
		}
		for _, pt := range l.Pending {
			seqs = append(seqs, pt.Seq)
		}
		if p.Cursor = l.Next; p.Cursor == "" {
			break
		}
	}
	if want := []uint64{1, 2, 3, 4, 5}; !slices.Equal(seqs, want) {
		t.Fatalf("pending by 2 = seqs %v, want %v", seqs, want)
	}
	if l, err := c.PendingPage(ctx, b.ID, client.Page{Limit: 5}); err != nil || len(l.Pending) != 5 || l.Next != "" {
		t.Fatalf("PendingPage(5) = %+v, %v; want the 5 and no next", l, err)
	}
	if ps, err := c.Pending(ctx, b.ID); err != nil || len(ps) != 5 {
		t.Fatalf("Pending() = %+v, %v; want the 5", ps, err)
	}
}

func idsOf(bs []api.Branch) []messages.BranchID {
	out := make([]messages.BranchID, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}

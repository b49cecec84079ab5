package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// TestTenancy: a branch made with a tenant is the tenant's, and so are
// the root its first append makes and every turn under it, also after a
// reopen; forks keep the tenant they are given; the runtime's branches
// and roots are their session's tenant's (none while the session is not
// written); everything else is the default tenant's.
func testTenancy(t *testing.T, d DB, reopen func() DB) {
	ctx := t.Context()
	now := time.Now()

	acme, err := d.CreateBranch(ctx, persistence.BranchSpec{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	root, err := d.Append(ctx, acme.Branch, persistence.AppendRequest{Payload: []byte("r")})
	if err != nil {
		t.Fatal(err)
	}
	child, err := d.Append(ctx, acme.Branch, persistence.AppendRequest{Payload: []byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	fork, err := d.CreateBranch(ctx, persistence.BranchSpec{At: child.ID, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := d.CreateBranch(ctx, persistence.BranchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	lt, err := d.Append(ctx, legacy.Branch, persistence.AppendRequest{Payload: []byte("l")})
	if err != nil {
		t.Fatal(err)
	}
	// A runtime session of globex's, and a branch of an import under way
	// (its session row not written yet).
	sess, rb, rt := messages.NewID[messages.SessionID](now), messages.NewID[messages.BranchID](now), messages.NewID[messages.TurnID](now)
	ib, it := messages.NewID[messages.BranchID](now), messages.NewID[messages.TurnID](now)
	if _, err := d.Commit(ctx, &persistence.Tx{
		NewBranches: []persistence.BranchSpec{{ID: rb}, {ID: ib}},
		Appends: []persistence.TxAppend{{Branch: rb, ID: rt, Req: persistence.AppendRequest{Payload: []byte("g")}},
			{Branch: ib, ID: it, Req: persistence.AppendRequest{Payload: []byte("i")}}},
		Sessions: []persistence.SessionRow{{ID: sess, ActiveBranch: rb, Created: now, Tenant: "globex"}},
		Branches: []persistence.BranchRow{{ID: rb, Session: sess, Created: now}, {ID: ib, Session: messages.NewID[messages.SessionID](now), Created: now}},
		NewTurns: []persistence.TurnRow{{Branch: rb, Seq: 1, ID: rt, Phase: messages.PhaseAccepted}, {Branch: ib, Seq: 1, ID: it, Phase: messages.PhaseAccepted}},
	}); err != nil {
		t.Fatal(err)
	}

	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			b    messages.BranchID
			want string
		}{{acme.Branch, "acme"}, {fork.Branch, "acme"}, {legacy.Branch, persistence.DefaultTenant}, {rb, "globex"}, {ib, ""}} {
			if got, err := d.BranchTenant(ctx, c.b); err != nil || got != c.want {
				t.Errorf("%s: BranchTenant(%s) = %q, %v; want %q", when, c.b, got, err, c.want)
			}
		}
		for _, c := range []struct {
			turn messages.TurnID
			want string
		}{{root.ID, "acme"}, {child.ID, "acme"}, {lt.ID, persistence.DefaultTenant}, {rt, "globex"}, {it, ""}} {
			if got, err := d.TurnTenant(ctx, c.turn); err != nil || got != c.want {
				t.Errorf("%s: TurnTenant(%s) = %q, %v; want %q", when, c.turn, got, err, c.want)
			}
		}
		rnd := messages.NewID[messages.BranchID](now)
		if _, err := d.BranchTenant(ctx, rnd); err == nil || err.Error() != persistence.BranchNotFound(rnd).Error() {
			t.Errorf("%s: BranchTenant(random) = %v, want %v", when, err, persistence.BranchNotFound(rnd))
		}
		rndT := messages.NewID[messages.TurnID](now)
		if _, err := d.TurnTenant(ctx, rndT); !errors.Is(err, persistence.ErrNodeNotFound) {
			t.Errorf("%s: TurnTenant(random) = %v, want ErrNodeNotFound", when, err)
		}
	}
	check("open")
	d = reopen()
	check("reopened")

	if _, err := d.CreateBranch(ctx, persistence.BranchSpec{Tenant: strings.Repeat("a", persistence.MaxTenantName+1)}); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Fatalf("a tenant name over %d bytes: %v, want ErrInvalidArgument", persistence.MaxTenantName, err)
	}
}

package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// testSessionPages pages through each tenant's sessions and a session's
// branches: every row once, in id order, none of another tenant's (a row
// naming no tenant is the default tenant's), limits out of range refused;
// a deleted session leaves its tenant's pages, and a reopened store keeps
// them.
func testSessionPages(t *testing.T, d DB, reopen func() DB) {
	now := time.UnixMilli(1_700_000_000_000)
	want := map[string][]messages.SessionID{}
	tx := &persistence.Tx{}
	for i := range 11 {
		tenant := []string{"", "acme", persistence.DefaultTenant, "acme2"}[i%4]
		id := messages.NewID[messages.SessionID](now)
		tx.Sessions = append(tx.Sessions, persistence.SessionRow{ID: id, Tenant: tenant, Created: now})
		name := tenant
		if name == "" {
			name = persistence.DefaultTenant
		}
		want[name] = append(want[name], id)
	}
	s := tx.Sessions[0].ID
	var branches []messages.BranchID
	for range 5 {
		b := messages.NewID[messages.BranchID](now)
		branches = append(branches, b)
		tx.Branches = append(tx.Branches, persistence.BranchRow{ID: b, Session: s, Created: now})
	}
	if _, err := d.Commit(bg, tx); err != nil {
		t.Fatal(err)
	}
	for _, ids := range want {
		slices.SortFunc(ids, func(a, b messages.SessionID) int { return a.Compare(b) })
	}
	pages := func(d DB, tenant string, limit int, newest bool) []messages.SessionID {
		t.Helper()
		var got []messages.SessionID
		var after messages.SessionID
		for {
			rows, err := d.SessionPage(bg, persistence.SessionQuery{Tenant: tenant, After: after, Limit: limit, Newest: newest})
			if err != nil {
				t.Fatalf("SessionPage(%q, %s, %d, newest %v): %v", tenant, after, limit, newest, err)
			}
			if len(rows) > limit {
				t.Fatalf("SessionPage(%q, %s, %d) = %d rows", tenant, after, limit, len(rows))
			}
			for _, r := range rows {
				if r.TenantName() != tenant && tenant != "" {
					t.Fatalf("SessionPage(%q) returned session %s of tenant %q", tenant, r.ID, r.TenantName())
				}
				got = append(got, r.ID)
			}
			if len(rows) < limit {
				return got
			}
			after = rows[len(rows)-1].ID
		}
	}
	check := func(d DB) {
		t.Helper()
		for tenant, ids := range want {
			for _, limit := range []int{1, 2, 3, persistence.MaxPageNodes} {
				if got := pages(d, tenant, limit, false); !slices.Equal(got, ids) {
					t.Fatalf("pages of %q by %d = %v, want %v", tenant, limit, got, ids)
				}
				got := pages(d, tenant, limit, true)
				slices.Reverse(got)
				if !slices.Equal(got, ids) {
					t.Fatalf("pages of %q by %d, newest first, reversed = %v, want %v", tenant, limit, got, ids)
				}
			}
		}
		if got := pages(d, "", 2, false); !slices.Equal(got, want[persistence.DefaultTenant]) {
			t.Fatalf(`pages of "" = %v, want the default tenant's %v`, got, want[persistence.DefaultTenant])
		}
		if got := pages(d, "nobody", 2, true); len(got) != 0 {
			t.Fatalf("pages of a tenant with no session = %v", got)
		}
		var got []messages.BranchID
		var after messages.BranchID
		for {
			rows, err := d.BranchPage(bg, s, after, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				got = append(got, r.ID)
			}
			if len(rows) < 2 {
				break
			}
			after = rows[len(rows)-1].ID
		}
		if !slices.Equal(got, branches) {
			t.Fatalf("BranchPage by 2 = %v, want %v", got, branches)
		}
	}
	check(d)
	for _, limit := range []int{-1, persistence.MaxPageNodes + 1} {
		if _, err := d.SessionPage(bg, persistence.SessionQuery{Tenant: "acme", Limit: limit}); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Fatalf("SessionPage(limit %d) err = %v, want ErrInvalidArgument", limit, err)
		}
		if _, err := d.BranchPage(bg, s, messages.BranchID{}, limit); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Fatalf("BranchPage(limit %d) err = %v, want ErrInvalidArgument", limit, err)
		}
	}
	gone := want["acme"][1]
	if _, err := d.Purge(bg, persistence.PurgeSpec{Session: gone, DeleteSession: true}); err != nil {
		t.Fatal(err)
	}
	want["acme"] = slices.DeleteFunc(want["acme"], func(id messages.SessionID) bool { return id == gone })
	check(d)
	check(reopen())
}

package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"errors"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// The conversations of versions before the index, sessions titled
// "proxy:<key>", are entered in it once, by the first Open of a store
// without the marker (the newest session of a key wins, as those
// versions found it); a session titled so afterwards is only a title. A
// new store is marked at once, so its sessions never are.
func TestProxyKeysFromTitlesOnce(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(TestOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_700_000_000_000)
	session := func(title string, at time.Time) persistence.SessionRow {
		s := persistence.SessionRow{ID: messages.NewID[messages.SessionID](at), Title: title,
			ActiveBranch: messages.NewID[messages.BranchID](at), Created: at.UTC()}
		if _, err := d.Commit(bg, &persistence.Tx{Sessions: []persistence.SessionRow{s}}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	reopen := func() {
		t.Helper()
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if d, err = Open(TestOptions(dir)); err != nil {
			t.Fatal(err)
		}
	}
	lookup := func(key string) (messages.BranchID, error) {
		got, err := d.ProxyLookup(bg, "", persistence.ProxyByKey, []byte(key))
		return got.Branch, err
	}

	// A new store: marked at its first Open.
	session("proxy:fresh", now)
	reopen()
	if b, err := lookup("fresh"); !errors.Is(err, persistence.ErrProxyNotFound) {
		t.Fatalf("a new store's session titled proxy:fresh = %s, %v; want no conversation", b, err)
	}

	// A store written by a version before the index: no marker.
	if err := d.writeRaw([]entry{{key: metaKey(proxyTitlesMeta), del: true}}); err != nil {
		t.Fatal(err)
	}
	old := session("proxy:old", now.Add(time.Second))
	newer := session("proxy:old", now.Add(2*time.Second))
	kept := session("proxy:kept", now.Add(3*time.Second))
	other := messages.NewID[messages.BranchID](now)
	if _, err := d.ClaimProxyKey(bg, "", "kept", other); err != nil { // entered by the index already
		t.Fatal(err)
	}
	session("not proxy:x", now.Add(4*time.Second))
	reopen()
	if b, err := lookup("old"); err != nil || b != newer.ActiveBranch {
		t.Fatalf("old = %s, %v; want the newest session's branch %s (not %s)", b, err, newer.ActiveBranch, old.ActiveBranch)
	}
	if b, err := lookup("kept"); err != nil || b != other {
		t.Fatalf("kept = %s, %v; want the index's entry %s kept (not %s)", b, err, other, kept.ActiveBranch)
	}
	if b, err := lookup("x"); !errors.Is(err, persistence.ErrProxyNotFound) {
		t.Fatalf("x = %s, %v; want none", b, err)
	}

	// Once: a session titled so later takes nothing over.
	session("proxy:later", now.Add(5*time.Second))
	session("proxy:old", now.Add(6*time.Second))
	reopen()
	defer d.Close()
	if b, err := lookup("later"); !errors.Is(err, persistence.ErrProxyNotFound) {
		t.Fatalf("later = %s, %v; want none", b, err)
	}
	if b, err := lookup("old"); err != nil || b != newer.ActiveBranch {
		t.Fatalf("old after a new session titled proxy:old = %s, %v; want %s kept", b, err, newer.ActiveBranch)
	}
}

// A tenant's import keys are its own: the owner of the default tenant's
// is zero, as before tenants, and two tenants' owners differ.
func TestTenantOwner(t *testing.T) {
	if o := persistence.TenantOwner(""); !o.IsZero() {
		t.Errorf("TenantOwner(\"\") = %s, want zero", o)
	}
	if o := persistence.TenantOwner(persistence.DefaultTenant); !o.IsZero() {
		t.Errorf("TenantOwner(%q) = %s, want zero", persistence.DefaultTenant, o)
	}
	a, b := persistence.TenantOwner("acme"), persistence.TenantOwner("beta")
	if a.IsZero() || b.IsZero() || a == b || a != persistence.TenantOwner("acme") {
		t.Errorf("TenantOwner(acme) = %s, TenantOwner(beta) = %s: want two stable non-zero owners", a, b)
	}
}

// The default tenant's entries are where the index kept them before
// tenants: at p|kind|name.
func TestProxyDefaultTenantKey(t *testing.T) {
	d := openDB(t)
	b := messages.NewID[messages.BranchID](time.Now())
	if _, err := d.Commit(bg, &persistence.Tx{Proxy: []persistence.ProxyEntry{{Kind: persistence.ProxyByKey, Name: []byte("shared-key"), ProxyTarget: persistence.ProxyTarget{Branch: b}}}}); err != nil {
		t.Fatal(err)
	}
	if got, err := getJSON[persistence.ProxyTarget](d, []byte("pkshared-key"), persistence.ErrProxyNotFound); err != nil || got.Branch != b {
		t.Errorf("the default tenant's key at p|k|key = %+v, %v; want its entry", got, err)
	}
}

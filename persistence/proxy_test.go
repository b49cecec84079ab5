package persistence

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
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
	session := func(title string, at time.Time) SessionRow {
		s := SessionRow{ID: messages.NewID[messages.SessionID](at), Title: title,
			ActiveBranch: messages.NewID[messages.BranchID](at), Created: at.UTC()}
		if _, err := d.Commit(bg, &Tx{Sessions: []SessionRow{s}}); err != nil {
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
		got, err := d.ProxyLookup(bg, "", ProxyByKey, []byte(key))
		return got.Branch, err
	}

	// A new store: marked at its first Open.
	session("proxy:fresh", now)
	reopen()
	if b, err := lookup("fresh"); !errors.Is(err, ErrProxyNotFound) {
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
	if b, err := lookup("x"); !errors.Is(err, ErrProxyNotFound) {
		t.Fatalf("x = %s, %v; want none", b, err)
	}

	// Once: a session titled so later takes nothing over.
	session("proxy:later", now.Add(5*time.Second))
	session("proxy:old", now.Add(6*time.Second))
	reopen()
	defer d.Close()
	if b, err := lookup("later"); !errors.Is(err, ErrProxyNotFound) {
		t.Fatalf("later = %s, %v; want none", b, err)
	}
	if b, err := lookup("old"); err != nil || b != newer.ActiveBranch {
		t.Fatalf("old after a new session titled proxy:old = %s, %v; want %s kept", b, err, newer.ActiveBranch)
	}
}

// Each tenant has its own proxy index: a key, a prefix, a turn or a
// request key entered for one tenant finds nothing for another, the
// same name in two tenants names two conversations, and the default
// tenant's entries are those written before tenants ("" and
// DefaultTenant are one tenant).
func TestProxyIndexPerTenant(t *testing.T) { forEachDB(t, testProxyIndexPerTenant) }

func testProxyIndexPerTenant(t *testing.T, d lifecycleDB) {
	now := time.UnixMilli(1_700_000_000_000)
	a, b, def := messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now)
	turn := messages.NewID[messages.TurnID](now)
	prefix := sha256.Sum256([]byte("the transcript"))
	entries := func(tenant string, br messages.BranchID) []ProxyEntry {
		return []ProxyEntry{
			{Tenant: tenant, Kind: ProxyByKey, Name: []byte("shared-key"), ProxyTarget: ProxyTarget{Branch: br}},
			{Tenant: tenant, Kind: ProxyByPrefix, Name: prefix[:], ProxyTarget: ProxyTarget{Branch: br, Turn: turn}},
			{Tenant: tenant, Kind: ProxyByTurn, Name: turn[:], ProxyTarget: ProxyTarget{Branch: br}},
			{Tenant: tenant, Kind: ProxyByRequest, Name: []byte("req-1"), ProxyTarget: ProxyTarget{Branch: br}},
			{Tenant: tenant, Kind: ProxyByResponse, Name: ProxyResponseName(turn, 0),
				ProxyTarget: ProxyTarget{Branch: br, Turn: turn, Response: json.RawMessage(`{"id":"resp"}`)}},
		}
	}
	if _, err := d.Commit(bg, &Tx{Proxy: entries("acme", a)}); err != nil {
		t.Fatal(err)
	}
	names := map[ProxyKind][]byte{ProxyByKey: []byte("shared-key"), ProxyByTurn: turn[:], ProxyByRequest: []byte("req-1"),
		ProxyByResponse: ProxyResponseName(turn, 0)}
	for _, tenant := range []string{"", DefaultTenant, "beta", "acm", "acmex"} {
		for kind, name := range names {
			if got, err := d.ProxyLookup(bg, tenant, kind, name); !errors.Is(err, ErrProxyNotFound) {
				t.Errorf("ProxyLookup(%q, %c) = %+v, %v; want acme's entry not found", tenant, byte(kind), got, err)
			}
		}
		if i, got, err := d.ProxyLongestPrefix(bg, tenant, [][32]byte{prefix}); err != nil || i != -1 {
			t.Errorf("ProxyLongestPrefix(%q) = %d, %+v, %v; want acme's prefix not found", tenant, i, got, err)
		}
	}
	// The same names in beta and in the default tenant are theirs.
	if _, err := d.Commit(bg, &Tx{Proxy: append(entries("beta", b), entries("", def)...)}); err != nil {
		t.Fatal(err)
	}
	for tenant, want := range map[string]messages.BranchID{"acme": a, "beta": b, "": def, DefaultTenant: def} {
		for kind, name := range names {
			if got, err := d.ProxyLookup(bg, tenant, kind, name); err != nil || got.Branch != want {
				t.Errorf("ProxyLookup(%q, %c) = %+v, %v; want %s", tenant, byte(kind), got, err, want)
			}
		}
		if i, got, err := d.ProxyLongestPrefix(bg, tenant, [][32]byte{prefix}); err != nil || i != 0 || got.Branch != want {
			t.Errorf("ProxyLongestPrefix(%q) = %d, %+v, %v; want %s", tenant, i, got, err, want)
		}
		if got, err := d.ClaimProxyKey(bg, tenant, "shared-key", messages.NewID[messages.BranchID](now)); err != nil || got.Branch != want {
			t.Errorf("ClaimProxyKey(%q) = %+v, %v; want %s kept", tenant, got, err, want)
		}
	}
	// The default tenant's entries are where the index kept them before.
	if _, err := rawKeyed[ProxyTarget](d, []byte("pkshared-key"), ErrProxyNotFound); err != nil {
		t.Errorf("the default tenant's key is not at p|k|key: %v", err)
	}
	long := strings.Repeat("t", MaxTenantName+1)
	if _, err := d.ProxyLookup(bg, long, ProxyByKey, []byte("k")); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "tenant") {
		t.Errorf("ProxyLookup(a %d-byte tenant) = %v, want ErrInvalidArgument naming the tenant", len(long), err)
	}
}

// A tenant's import keys are its own: the owner of the default tenant's
// is zero, as before tenants, and two tenants' owners differ.
func TestTenantOwner(t *testing.T) {
	if o := TenantOwner(""); !o.IsZero() {
		t.Errorf("TenantOwner(\"\") = %s, want zero", o)
	}
	if o := TenantOwner(DefaultTenant); !o.IsZero() {
		t.Errorf("TenantOwner(%q) = %s, want zero", DefaultTenant, o)
	}
	a, b := TenantOwner("acme"), TenantOwner("beta")
	if a.IsZero() || b.IsZero() || a == b || a != TenantOwner("acme") {
		t.Errorf("TenantOwner(acme) = %s, TenantOwner(beta) = %s: want two stable non-zero owners", a, b)
	}
}

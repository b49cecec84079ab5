package storetest

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// The proxy index keeps the first entry of a name, finds the longest
// prefix it holds, refuses malformed entries with nothing of their Tx
// written, and keeps everything across a reopen.
func testProxyIndex(t *testing.T, d DB, reopen func() DB) {
	now := time.UnixMilli(1_700_000_000_000)
	b1, b2 := messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now)
	t1 := messages.NewID[messages.TurnID](now)

	if _, err := d.ProxyLookup(bg, "", persistence.ProxyByKey, []byte("alice")); !errors.Is(err, persistence.ErrProxyNotFound) {
		t.Fatalf("ProxyLookup before = %v, want ErrProxyNotFound", err)
	}
	got, err := d.ClaimProxyKey(bg, "", "alice", b1)
	if err != nil || got.Branch != b1 {
		t.Fatalf("ClaimProxyKey(alice, b1) = %+v, %v; want b1", got, err)
	}
	// A second claim, or a second entry in one Tx, finds the first.
	if got, err := d.ClaimProxyKey(bg, "", "alice", b2); err != nil || got.Branch != b1 {
		t.Fatalf("ClaimProxyKey(alice, b2) = %+v, %v; want b1 kept", got, err)
	}
	twice := []persistence.ProxyEntry{
		{Kind: persistence.ProxyByKey, Name: []byte("bob"), ProxyTarget: persistence.ProxyTarget{Branch: b2}},
		{Kind: persistence.ProxyByKey, Name: []byte("bob"), ProxyTarget: persistence.ProxyTarget{Branch: b1}},
	}
	if _, err := d.Commit(bg, &persistence.Tx{Proxy: twice}); err != nil {
		t.Fatal(err)
	}
	if got, err := d.ProxyLookup(bg, "", persistence.ProxyByKey, []byte("bob")); err != nil || got.Branch != b2 {
		t.Fatalf("bob = %+v, %v; want the first entry of the Tx (b2)", got, err)
	}

	h := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }
	prefixes := []persistence.ProxyEntry{
		{Kind: persistence.ProxyByPrefix, Name: hs(h("a")), ProxyTarget: persistence.ProxyTarget{Branch: b1, Turn: t1}},
		{Kind: persistence.ProxyByPrefix, Name: hs(h("abc")), ProxyTarget: persistence.ProxyTarget{Branch: b2, Turn: t1}},
		{Kind: persistence.ProxyByTurn, Name: t1[:], ProxyTarget: persistence.ProxyTarget{Branch: b1}},
	}
	if _, err := d.Commit(bg, &persistence.Tx{Proxy: prefixes}); err != nil {
		t.Fatal(err)
	}
	// A response is held as given, the first one of its name.
	resp := json.RawMessage(`{"id":"resp_x_1","output":[{"type":"message","id":"msg_x_1"}]}`)
	responses := []persistence.ProxyEntry{
		{Kind: persistence.ProxyByResponse, Name: persistence.ProxyResponseName(t1, 1), ProxyTarget: persistence.ProxyTarget{Branch: b1, Turn: t1, Response: resp}},
		{Kind: persistence.ProxyByResponse, Name: persistence.ProxyResponseName(t1, 1), ProxyTarget: persistence.ProxyTarget{Branch: b2, Turn: t1, Response: json.RawMessage(`{}`)}},
	}
	if _, err := d.Commit(bg, &persistence.Tx{Proxy: responses}); err != nil {
		t.Fatal(err)
	}
	if got, err := d.ProxyLookup(bg, "", persistence.ProxyByResponse, persistence.ProxyResponseName(t1, 1)); err != nil || got.Branch != b1 || got.Turn != t1 ||
		string(got.Response) != string(resp) {
		t.Fatalf("response = %+v (%s), %v; want the first entry's %s", got, got.Response, err, resp)
	}
	for _, other := range [][]byte{persistence.ProxyResponseName(t1, 0), persistence.ProxyResponseName(t1, 2)} {
		if _, err := d.ProxyLookup(bg, "", persistence.ProxyByResponse, other); !errors.Is(err, persistence.ErrProxyNotFound) {
			t.Errorf("response %x = %v, want ErrProxyNotFound", other, err)
		}
	}
	// Another kind's entry holds no response.
	if got, err := d.ProxyLookup(bg, "", persistence.ProxyByTurn, t1[:]); err != nil || got.Response != nil {
		t.Errorf("turn entry = %+v, %v; want no response", got, err)
	}
	if _, err := d.Commit(bg, &persistence.Tx{Proxy: prefixes}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		hashes []string
		want   int
		branch messages.BranchID
	}{
		{[]string{"a", "ab", "abc", "abcd"}, 2, b2},
		{[]string{"a", "ab"}, 0, b1},
		{[]string{"x", "y"}, -1, messages.BranchID{}},
		{nil, -1, messages.BranchID{}},
	} {
		var in [][32]byte
		for _, s := range tc.hashes {
			in = append(in, h(s))
		}
		i, got, err := d.ProxyLongestPrefix(bg, "", in)
		if err != nil || i != tc.want || got.Branch != tc.branch {
			t.Errorf("ProxyLongestPrefix(%v) = %d, %+v, %v; want %d, %s", tc.hashes, i, got, err, tc.want, tc.branch)
		}
	}

	// Malformed entries fail their whole Tx.
	s := persistence.SessionRow{ID: messages.NewID[messages.SessionID](now)}
	for _, bad := range []persistence.ProxyEntry{
		{Kind: persistence.ProxyByKey, ProxyTarget: persistence.ProxyTarget{Branch: b1}},
		{Kind: persistence.ProxyByKey, Name: []byte(strings.Repeat("k", persistence.MaxProxyKey+1)), ProxyTarget: persistence.ProxyTarget{Branch: b1}},
		{Kind: persistence.ProxyByPrefix, Name: []byte("short"), ProxyTarget: persistence.ProxyTarget{Branch: b1}},
		{Kind: persistence.ProxyByTurn, Name: t1[:], ProxyTarget: persistence.ProxyTarget{}},
		{Kind: persistence.ProxyByRequest, Name: []byte("tab\there"), ProxyTarget: persistence.ProxyTarget{Branch: b1}},
		{Kind: 'z', Name: []byte("x"), ProxyTarget: persistence.ProxyTarget{Branch: b1}},
		{Kind: persistence.ProxyByResponse, Name: t1[:], ProxyTarget: persistence.ProxyTarget{Branch: b1, Response: resp}},
		{Kind: persistence.ProxyByResponse, Name: persistence.ProxyResponseName(t1, 2), ProxyTarget: persistence.ProxyTarget{Branch: b1}},
		{Kind: persistence.ProxyByResponse, Name: persistence.ProxyResponseName(t1, 2), ProxyTarget: persistence.ProxyTarget{Branch: b1, Response: json.RawMessage(`[1]`)}},
		{Kind: persistence.ProxyByResponse, Name: persistence.ProxyResponseName(t1, 2), ProxyTarget: persistence.ProxyTarget{Branch: b1, Response: json.RawMessage(`{"a":`)}},
		{Kind: persistence.ProxyByResponse, Name: persistence.ProxyResponseName(t1, 2), ProxyTarget: persistence.ProxyTarget{Branch: b1,
			Response: json.RawMessage(`{"text":"` + strings.Repeat("x", int(d.MaxPayloadBytes())) + `"}`)}},
		{Kind: persistence.ProxyByTurn, Name: t1[:], ProxyTarget: persistence.ProxyTarget{Branch: b1, Response: resp}},
	} {
		_, err := d.Commit(bg, &persistence.Tx{Sessions: []persistence.SessionRow{s}, Proxy: []persistence.ProxyEntry{bad}})
		if !(errors.Is(err, persistence.ErrInvalidArgument) || errors.Is(err, persistence.ErrTooLarge)) || !strings.Contains(err.Error(), "proxy") {
			t.Errorf("Commit(%c entry %q) = %v, want ErrInvalidArgument naming the proxy entry", byte(bad.Kind), bad.Name, err)
		}
	}
	if _, err := d.Session(bg, s.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Errorf("a Tx with a bad proxy entry wrote its session: %v", err)
	}

	d = reopen()
	if got, err := d.ProxyLookup(bg, "", persistence.ProxyByKey, []byte("alice")); err != nil || got.Branch != b1 {
		t.Fatalf("alice after reopen = %+v, %v; want b1", got, err)
	}
	if got, err := d.ProxyLookup(bg, "", persistence.ProxyByTurn, t1[:]); err != nil || got.Branch != b1 {
		t.Fatalf("turn after reopen = %+v, %v; want b1", got, err)
	}
	if got, err := d.ProxyLookup(bg, "", persistence.ProxyByResponse, persistence.ProxyResponseName(t1, 1)); err != nil || string(got.Response) != string(resp) {
		t.Fatalf("response after reopen = %+v, %v; want %s", got, err, resp)
	}
	if i, got, err := d.ProxyLongestPrefix(bg, "", [][32]byte{h("a"), h("abc")}); err != nil || i != 1 || got.Turn != t1 {
		t.Fatalf("prefix after reopen = %d, %+v, %v", i, got, err)
	}
}

func hs(h [32]byte) []byte { return h[:] }

// Each tenant has its own proxy index: a key, a prefix, a turn or a
// request key entered for one tenant finds nothing for another, the
// same name in two tenants names two conversations, and the default
// tenant's entries are those written before tenants ("" and
// DefaultTenant are one tenant).
func testProxyIndexPerTenant(t *testing.T, d DB) {
	now := time.UnixMilli(1_700_000_000_000)
	a, b, def := messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now), messages.NewID[messages.BranchID](now)
	turn := messages.NewID[messages.TurnID](now)
	prefix := sha256.Sum256([]byte("the transcript"))
	entries := func(tenant string, br messages.BranchID) []persistence.ProxyEntry {
		return []persistence.ProxyEntry{
			{Tenant: tenant, Kind: persistence.ProxyByKey, Name: []byte("shared-key"), ProxyTarget: persistence.ProxyTarget{Branch: br}},
			{Tenant: tenant, Kind: persistence.ProxyByPrefix, Name: prefix[:], ProxyTarget: persistence.ProxyTarget{Branch: br, Turn: turn}},
			{Tenant: tenant, Kind: persistence.ProxyByTurn, Name: turn[:], ProxyTarget: persistence.ProxyTarget{Branch: br}},
			{Tenant: tenant, Kind: persistence.ProxyByRequest, Name: []byte("req-1"), ProxyTarget: persistence.ProxyTarget{Branch: br}},
			{Tenant: tenant, Kind: persistence.ProxyByResponse, Name: persistence.ProxyResponseName(turn, 0),
				ProxyTarget: persistence.ProxyTarget{Branch: br, Turn: turn, Response: json.RawMessage(`{"id":"resp"}`)}},
		}
	}
	if _, err := d.Commit(bg, &persistence.Tx{Proxy: entries("acme", a)}); err != nil {
		t.Fatal(err)
	}
	names := map[persistence.ProxyKind][]byte{persistence.ProxyByKey: []byte("shared-key"), persistence.ProxyByTurn: turn[:], persistence.ProxyByRequest: []byte("req-1"),
		persistence.ProxyByResponse: persistence.ProxyResponseName(turn, 0)}
	for _, tenant := range []string{"", persistence.DefaultTenant, "beta", "acm", "acmex"} {
		for kind, name := range names {
			if got, err := d.ProxyLookup(bg, tenant, kind, name); !errors.Is(err, persistence.ErrProxyNotFound) {
				t.Errorf("ProxyLookup(%q, %c) = %+v, %v; want acme's entry not found", tenant, byte(kind), got, err)
			}
		}
		if i, got, err := d.ProxyLongestPrefix(bg, tenant, [][32]byte{prefix}); err != nil || i != -1 {
			t.Errorf("ProxyLongestPrefix(%q) = %d, %+v, %v; want acme's prefix not found", tenant, i, got, err)
		}
	}
	// The same names in beta and in the default tenant are theirs.
	if _, err := d.Commit(bg, &persistence.Tx{Proxy: append(entries("beta", b), entries("", def)...)}); err != nil {
		t.Fatal(err)
	}
	for tenant, want := range map[string]messages.BranchID{"acme": a, "beta": b, "": def, persistence.DefaultTenant: def} {
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
	long := strings.Repeat("t", persistence.MaxTenantName+1)
	if _, err := d.ProxyLookup(bg, long, persistence.ProxyByKey, []byte("k")); !errors.Is(err, persistence.ErrInvalidArgument) || !strings.Contains(err.Error(), "tenant") {
		t.Errorf("ProxyLookup(a %d-byte tenant) = %v, want ErrInvalidArgument naming the tenant", len(long), err)
	}
}

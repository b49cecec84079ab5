package tests

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// tenantCall sends a request to s with token as its bearer token and
// returns the status, the body and the headers.
func tenantCall(t *testing.T, s *server, token, method, path, body string, headers ...string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data), resp.Header
}

// Two tenants on the real binary, their tokens from the environment
// (server.tenants through CTX_SERVER_TENANTS): tenant beta never sees
// tenant acme's session: not in its lists, and every route with acme's
// ids answers 404; beta's proxied request under acme's conversation key
// gets a conversation of beta's own, without acme's text; across a
// restart too. A bad tenant name stops serve before it starts, naming
// the key.
func TestTenantsOnTheBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const marker = "acme-marker-5d1c0e77"
	const acme, beta = "tok-acme-1", "tok-beta-1"
	tenantEnv := []string{"CTX_SERVER_TENANTS=acme=CTX_T_ACME_TOKENS,beta=CTX_T_BETA_TOKENS",
		"CTX_T_ACME_TOKENS=" + acme, "CTX_T_BETA_TOKENS=" + beta + ",tok-beta-2", "CTX_SERVER_TOKENS=tok-default"}
	s := startServe(t, dir, tenantEnv...)

	// Tenant acme: a session, a turn and a pin holding the marker, and a
	// proxied conversation under the key "team-chat".
	st, body, _ := tenantCall(t, s, acme, "POST", "/v1/sessions", `{"title":"acme's"}`)
	var created struct {
		Session struct{ ID, Tenant string }
		Branch  struct{ ID string }
	}
	if st != 201 || json.Unmarshal([]byte(body), &created) != nil || created.Session.Tenant != "acme" {
		t.Fatalf("acme creates a session: %d %s", st, body)
	}
	sess, br := created.Session.ID, created.Branch.ID
	st, body, _ = tenantCall(t, s, acme, "POST", "/v1/branches/"+br+"/turns", `{"text":"The vault code is `+marker+`."}`)
	var turn struct{ Turn string }
	if st != 200 || json.Unmarshal([]byte(body), &turn) != nil || turn.Turn == "" {
		t.Fatalf("acme's turn: %d %s", st, body)
	}
	if st, body, _ = tenantCall(t, s, acme, "POST", "/v1/branches/"+br+"/pins", `{"fact":"pinned `+marker+`"}`); st != 201 {
		t.Fatalf("acme's pin: %d %s", st, body)
	}
	chat := func(token, text string) (int, string, string) {
		st, body, h := tenantCall(t, s, token, "POST", "/v1/chat/completions",
			`{"model":"local","user":"team-chat","messages":[{"role":"user","content":"`+text+`"}]}`)
		return st, body, h.Get("X-Ctx-Branch")
	}
	st, body, acmeConv := chat(acme, "Our launch word is "+marker+".")
	if st != 200 || acmeConv == "" {
		t.Fatalf("acme's proxied chat: %d %s", st, body)
	}

	checkBeta := func(when string) {
		t.Helper()
		// Lists: acme's session is absent.
		for _, path := range []string{"/v1/sessions", "/v1/inspect"} {
			st, body, _ := tenantCall(t, s, beta, "GET", path, "")
			if st != 200 || strings.Contains(body, sess) || strings.Contains(body, marker) {
				t.Errorf("%s: GET %s by beta: %d %s, want acme's session absent", when, path, st, body)
			}
		}
		// Every route with acme's ids: 404, nothing of acme's.
		b := "/v1/branches/" + br
		for _, c := range []struct{ method, path, body string }{
			{"GET", b, ""},
			{"GET", b + "/turns/" + turn.Turn, ""},
			{"GET", b + "/turns/1", ""},
			{"GET", b + "/history", ""},
			{"GET", b + "/pins", ""},
			{"GET", b + "/pending", ""},
			{"GET", b + "/context", ""},
			{"POST", b + "/search", `{"query":"vault code"}`},
			{"POST", b + "/forks", `{"label":"beta's"}`},
			{"POST", b + "/pins", `{"fact":"beta was here"}`},
			{"POST", b + "/turns", `{"text":"what is the vault code?"}`},
			{"GET", "/v1/sessions/" + sess + "/export", ""},
			{"GET", "/v1/sessions/" + sess + "/branches", ""},
		} {
			st, body, _ := tenantCall(t, s, beta, c.method, c.path, c.body)
			if st != 404 || !strings.Contains(body, `"not_found"`) || strings.Contains(body, marker) {
				t.Errorf("%s: %s %s by beta: %d %s, want 404", when, c.method, c.path, st, body)
			}
		}
		// The proxy: acme's branch named is not found; acme's key is a
		// conversation of beta's own.
		st, body, _ := tenantCall(t, s, beta, "POST", "/v1/chat/completions",
			`{"model":"local","messages":[{"role":"user","content":"hi"}]}`, "X-Ctx-Branch", br)
		if st != 404 || strings.Contains(body, marker) {
			t.Errorf("%s: beta's chat on acme's branch: %d %s, want 404", when, st, body)
		}
		st, body, conv := chat(beta, "What is our launch word?")
		if st != 200 || conv == "" || conv == acmeConv || conv == br || strings.Contains(body, marker) {
			t.Errorf("%s: beta's chat under acme's key: %d, branch %q (acme's %s) %s; want a conversation of beta's without acme's text",
				when, st, conv, acmeConv, body)
		}
		st, body, _ = tenantCall(t, s, beta, "GET", "/v1/branches/"+conv+"/history", "")
		if st != 200 || strings.Contains(body, marker) || strings.Contains(body, "launch word is") {
			t.Errorf("%s: beta's conversation: %d %s, want beta's messages only", when, st, body)
		}
		// The other token of beta is beta too: it sees beta's conversation.
		if st, _, _ := tenantCall(t, s, "tok-beta-2", "GET", "/v1/branches/"+conv, ""); st != 200 {
			t.Errorf("%s: beta's second token on beta's conversation: %d, want 200", when, st)
		}
	}
	checkBeta("serving")

	// Acme's session is as acme left it, and still acme's after a restart.
	checkAcme := func(when string) {
		t.Helper()
		st, body, _ := tenantCall(t, s, acme, "GET", "/v1/sessions/"+sess+"/branches", "")
		var bs struct{ Branches []struct{ ID string } }
		if st != 200 || json.Unmarshal([]byte(body), &bs) != nil || len(bs.Branches) != 1 {
			t.Errorf("%s: acme's branches: %d %s, want its one branch", when, st, body)
		}
		st, body, _ = tenantCall(t, s, acme, "GET", "/v1/branches/"+br+"/history", "")
		if st != 200 || !strings.Contains(body, marker) || strings.Contains(body, "beta") {
			t.Errorf("%s: acme's history: %d %s, want its own turn only", when, st, body)
		}
		st, body, _ = tenantCall(t, s, acme, "GET", "/v1/branches/"+br+"/pins", "")
		if st != 200 || strings.Count(body, `"id"`) != 1 || strings.Contains(body, "beta") {
			t.Errorf("%s: acme's pins: %d %s, want its one pin", when, st, body)
		}
		st, body, _ = tenantCall(t, s, acme, "GET", "/v1/branches/"+acmeConv+"/history", "")
		if st != 200 || strings.Contains(body, "What is our launch word") {
			t.Errorf("%s: acme's proxied conversation: %d %s, want none of beta's messages", when, st, body)
		}
		// The default tenant's token sees neither.
		st, body, _ = tenantCall(t, s, "tok-default", "GET", "/v1/sessions", "")
		if st != 200 || strings.Contains(body, sess) {
			t.Errorf("%s: the default tenant's sessions: %d %s, want acme's absent", when, st, body)
		}
	}
	checkAcme("serving")
	s.stop(t)
	s = startServe(t, dir, tenantEnv...)
	checkBeta("after a restart")
	checkAcme("after a restart")
	s.stop(t)

	// A bad tenant name: serve refuses to start, naming the key.
	cmd := exec.Command(binary, "serve")
	cmd.Env = env(dir, "CTX_SERVER_TENANTS=Acme=CTX_T_ACME_TOKENS", "CTX_T_ACME_TOKENS="+acme)
	out, err := cmd.CombinedOutput()
	if ee := (*exec.ExitError)(nil); err == nil || !errors.As(err, &ee) || ee.ExitCode() != 2 ||
		!strings.Contains(string(out), `server.tenants[0].name: "Acme"`) {
		t.Errorf("serve with a tenant named Acme: %v %s, want exit 2 naming server.tenants[0].name", err, out)
	}
}

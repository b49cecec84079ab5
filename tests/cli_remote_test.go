package tests

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// cli runs `ctxinf args...` on data directory dir and returns its output;
// the test fails if it exits non-zero.
func cli(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = env(dir)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("ctxinf %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// While `ctxinf serve` owns a data directory, inspect, search, reindex and
// context debug on it talk to the server (found from the server.json it wrote)
// instead of failing on the store's lock, and print what they print on
// the data directory alone.
func TestCommandsTalkToTheServerOwningTheDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir)
	var created struct {
		Branch struct {
			ID string `json:"id"`
		} `json:"branch"`
	}
	if st := postJSON(t, s.url+"/v1/sessions", map[string]string{"title": "remote"}, &created); st != 200 && st != 201 {
		t.Fatalf("create session: %d", st)
	}
	b := created.Branch.ID
	for _, text := range []string{"Remember: the staging host is blue-7.", "The release train leaves on Thursdays."} {
		var turn struct{ Phase string }
		if st := postJSON(t, s.url+"/v1/branches/"+b+"/turns", map[string]any{"text": text}, &turn); st != 200 {
			t.Fatalf("turn: %d", st)
		}
	}
	if st := postJSON(t, s.url+"/v1/branches/"+b+"/commit", map[string]any{}, nil); st != 202 {
		t.Fatalf("commit: %d", st)
	}
	// Wait until the turns are folded and indexed (no job left), so that the
	// server's answers and the store's agree after it stops.
	deadline := time.Now().Add(20 * time.Second)
	var remote string
	for {
		remote = cli(t, dir, "inspect", "--json")
		var rep struct{ Jobs []json.RawMessage }
		if err := json.Unmarshal([]byte(remote), &rep); err != nil {
			t.Fatalf("inspect --json through the server: %v\n%s", err, remote)
		}
		if len(rep.Jobs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs still pending: %s", remote)
		}
		time.Sleep(50 * time.Millisecond) // polling the server's jobs
	}
	// The report reads the turns before the jobs: a turn indexed between
	// the two reads shows its old phase and no job. Read it again, now
	// that no job was left.
	remote = cli(t, dir, "inspect", "--json")
	// reindex through the server: everything is indexed already.
	if out := cli(t, dir, "reindex"); !strings.Contains(out, "branch "+b+": 0 chunks inserted") {
		t.Fatalf("reindex through the server: %s, want branch %s with nothing to insert", out, b)
	}
	if out := cli(t, dir, "reindex", "--branch", b); !strings.Contains(out, "0 chunks inserted") {
		t.Fatalf("reindex --branch through the server: %s", out)
	}
	remoteText := cli(t, dir, "inspect")
	remoteSearch := cli(t, dir, "search", "--branch", b, "staging host")
	remoteDebug := cli(t, dir, "context", "debug", "--branch", b, "--turn", "2")
	if !strings.Contains(remoteSearch, "blue-7") || !strings.Contains(remoteDebug, "rebuilt from the store: matches") ||
		!strings.Contains(remoteText, "remote") {
		t.Fatalf("through the server:\n%s\n%s\n%s", remoteText, remoteSearch, remoteDebug)
	}
	s.stop(t)

	if local := cli(t, dir, "inspect", "--json"); local != remote {
		t.Errorf("inspect --json: through the server\n%s\non the data dir\n%s", remote, local)
	}
	if local := cli(t, dir, "inspect"); local != remoteText {
		t.Errorf("inspect: through the server\n%s\non the data dir\n%s", remoteText, local)
	}
	if local := cli(t, dir, "search", "--branch", b, "staging host"); local != remoteSearch {
		t.Errorf("search: through the server\n%s\non the data dir\n%s", remoteSearch, local)
	}
	if local := cli(t, dir, "context", "debug", "--branch", b, "--turn", "2"); local != remoteDebug {
		t.Errorf("context debug: through the server\n%s\non the data dir\n%s", remoteDebug, local)
	}
}

// chatLines runs `ctxinf chat args...` on dir with input and returns what
// it printed.
func chatLines(t *testing.T, dir, input string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"chat"}, args...)...)
	cmd.Env = env(dir)
	cmd.Stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("ctxinf chat: %v\n%s%s", err, out.String(), errOut.String())
	}
	return out.String()
}

// While ctxinf serve owns the data directory, ctxinf chat on it chats
// through the server's API: turns stream, and the commands print what
// they print on the data directory alone.
func TestChatTalksToTheServerOwningTheDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir)
	out := chatLines(t, dir, "hello through the server\nsecond turn\n/history\n/pending\n/model\n/fork 1\n/branches\n/quit\n")
	for _, want := range []string{"server " + s.url, "provider local, model local", "I received your message (4 words)",
		"[turn 1 · response_finalized", "[turn 2 · response_finalized", "#0 user: hello through the server",
		"turn 1 (", "is pending", "this branch uses: default", "now on branch", "forked from"} {
		if !strings.Contains(out, want) {
			t.Fatalf("chat through the server lacks %q:\n%s", want, out)
		}
	}
	remote := chatLines(t, dir, "/history\n/pending\n/quit\n")
	s.stop(t)
	local := chatLines(t, dir, "/history\n/pending\n/quit\n")
	strip := func(s string) string { // the first line names the server or the data dir
		_, rest, _ := strings.Cut(s, "\n")
		return rest
	}
	if strip(remote) != strip(local) {
		t.Fatalf("chat /history and /pending: through the server\n%s\non the data dir\n%s", remote, local)
	}
}

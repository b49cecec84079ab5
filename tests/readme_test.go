package tests

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// readmeCurls returns the curl commands in README.md's code blocks, in
// order, without their trailing comments.
func readmeCurls(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	inBlock := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock && strings.HasPrefix(line, "curl ") {
			if i := strings.Index(line, "  #"); i > 0 {
				line = line[:i]
			}
			out = append(out, strings.TrimSpace(line))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The README's curl examples work as written against a real server: each
// answers 2xx with JSON or server-sent events, no error. BRANCH and
// SESSION stand for the ids the first example (create a session) answers.
func TestReadmeCurlExamples(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the README's examples need it")
	}
	curls := readmeCurls(t)
	if len(curls) < 3 {
		t.Fatalf("README.md has %d curl examples, want at least 3", len(curls))
	}
	s := startServe(t, t.TempDir())
	host := strings.TrimPrefix(s.url, "http://")
	placeholder := regexp.MustCompile(`\b[A-Z][A-Z_]{3,}\b`)
	ids := map[string]string{}
	for i, c := range curls {
		c = strings.ReplaceAll(c, "localhost:8080", host)
		c = placeholder.ReplaceAllStringFunc(c, func(p string) string {
			if id, ok := ids[p]; ok {
				return id
			}
			return p
		})
		for _, p := range placeholder.FindAllString(c, -1) {
			if !strings.HasPrefix(p, "X") || !strings.Contains(c, "-"+p) { // not curl's -XPOST
				t.Fatalf("README example %d has placeholder %s that this test does not know: %s", i+1, p, curls[i])
			}
		}
		out, err := exec.Command("sh", "-c", c+" -w '\\n%{http_code}'").Output()
		if err != nil {
			t.Fatalf("README example %d: %s: %v", i+1, c, err)
		}
		j := strings.LastIndex(string(out), "\n")
		body, code := strings.TrimRight(string(out[:max(j, 0)]), "\n"), string(out[j+1:])
		if !strings.HasPrefix(code, "2") {
			t.Fatalf("README example %d: %s answered %s:\n%s", i+1, curls[i], code, body)
		}
		if strings.Contains(body, `"error"`) || strings.Contains(body, "event: error") {
			t.Fatalf("README example %d: %s answered an error:\n%s", i+1, curls[i], body)
		}
		if i == 0 {
			var created struct {
				Session struct{ ID string } `json:"session"`
				Branch  struct{ ID string } `json:"branch"`
			}
			if err := json.Unmarshal([]byte(body), &created); err != nil || created.Branch.ID == "" {
				t.Fatalf("README example 1 (create a session) answered %q (%v)", body, err)
			}
			ids["BRANCH"], ids["SESSION"] = created.Branch.ID, created.Session.ID
		}
		if strings.Contains(c, `"stream":true`) && !strings.Contains(body, "event: done") {
			t.Fatalf("README example %d streams no done event:\n%s", i+1, body)
		}
	}
	s.stop(t)
}

package tests

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
)

// genExport writes an export (format 2) of one branch of n turns, each
// reply reply bytes long, folded every `every` turns by a state; end is
// its end line, apart.
func genExport(t *testing.T, title string, n, every, reply int) (body, end []byte) {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"type":"session","format":2,"title":%q,"created":"2025-01-02T03:04:05Z"}`+"\n", title)
	b.WriteString(`{"type":"branch","label":"main","created":"2025-01-02T03:04:05Z","parent":-1,"fork_at_depth":0,"tip_depth":0,"fork_seq":0,"base":{"seq":0,"summary":""}}` + "\n")
	text := strings.Repeat("r", reply)
	states := 0
	for i := 1; i <= n; i++ {
		u, _ := json.Marshal(messages.NewMessage(messages.RoleUser, messages.Text{Text: "question " + strconv.Itoa(i)}))
		r, _ := json.Marshal(messages.NewMessage(messages.RoleAssistant, messages.Text{Text: text}))
		fmt.Fprintf(&b, `{"type":"turn","seq":%d,"user":%s,"reply":%s}`+"\n", i, u, r)
		if every > 0 && i%every == 0 {
			states++
			seqs := make([]string, every)
			for k := range seqs {
				seqs[k] = strconv.Itoa(i - every + 1 + k)
			}
			fmt.Fprintf(&b, `{"type":"state","seq":%d,"summary":"summary %d","turns":[%s]}`+"\n", states, states, strings.Join(seqs, ","))
		}
	}
	b.WriteString(`{"type":"head"}` + "\n")
	sum := sha256.Sum256(b.Bytes())
	end = fmt.Appendf(nil, `{"type":"end","branches":1,"turns":%d,"states":%d,"active_branch":0,"sha256":%q}`+"\n",
		n, states, hex.EncodeToString(sum[:]))
	return b.Bytes(), end
}

type imported struct {
	Session struct{ ID, Title string }
	Branch  struct{ ID string }
	Turns   int
	Error   struct{ Code, Message string }
}

func postImport(t *testing.T, url string, body io.Reader) (int, imported) {
	t.Helper()
	resp, err := http.Post(url+"/v1/sessions/import", "application/x-ndjson", body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out imported
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("import: %d %s", resp.StatusCode, data)
	}
	return resp.StatusCode, out
}

func sessions(t *testing.T, url string) []struct{ ID, Title string } {
	t.Helper()
	resp, err := http.Get(url + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Sessions []struct{ ID, Title string } }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Sessions
}

// recorded reads the turns recorded by imports from /metrics.
func recorded(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `ctxinf_turns_total{event="recorded"} `); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return 0
}

// genV1 writes an export of format 1 (a session line, then messages) of
// n turns, each reply reply bytes long.
func genV1(title string, n, reply int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"type":"session","title":%q}`+"\n", title)
	text := strings.Repeat("r", reply)
	for i := 1; i <= n; i++ {
		u, _ := json.Marshal(messages.NewMessage(messages.RoleUser, messages.Text{Text: "question " + strconv.Itoa(i)}))
		r, _ := json.Marshal(messages.NewMessage(messages.RoleAssistant, messages.Text{Text: text}))
		fmt.Fprintf(&b, `{"type":"message","message":%s}`+"\n"+`{"type":"message","message":%s}`+"\n", u, r)
	}
	return b.Bytes()
}

// An import killed midway (SIGKILL after thousands of its turns were
// recorded) leaves no partial session after a restart: none, or (had it
// ended before the kill) all of it; the whole export then imports in
// full. Format 2 is sent without its end line, so that the kill is
// surely midway; format 1 whole.
func TestImportKilledMidway(t *testing.T) {
	t.Parallel()
	const n = 5000
	v2, end := genExport(t, "killed midway", n, 10, 200)
	for _, c := range []struct {
		name       string
		sent, full []byte
	}{
		{"format 2", v2, append(slices.Clone(v2), end...)},
		{"format 1", genV1("killed midway", n, 200), genV1("killed midway", n, 200)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := startServe(t, dir)
			pr, pw := io.Pipe()
			go func() {
				_, _ = pw.Write(c.sent)
				if c.name == "format 1" {
					pw.Close()
				}
			}()
			posted := make(chan struct{})
			go func() {
				defer close(posted)
				req, _ := http.NewRequest("POST", s.url+"/v1/sessions/import", pr)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			deadline := time.Now().Add(60 * time.Second)
			for recorded(t, s.url) < 2000 {
				if time.Now().After(deadline) {
					t.Fatalf("the import recorded %d turns in 60 s", recorded(t, s.url))
				}
				time.Sleep(10 * time.Millisecond) // polling, with a deadline
			}
			if err := s.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-s.done
			pw.CloseWithError(io.ErrClosedPipe)
			<-posted

			s = startServe(t, dir)
			if ss := sessions(t, s.url); len(ss) > 0 {
				if seq := turnSeq(t, s.url, ss[0].ID); len(ss) != 1 || seq != n {
					t.Fatalf("after a SIGKILL mid-import, sessions %v are listed, the first with %d of %d turns; want none, or all", ss, seq, n)
				}
				return // it ended before the kill
			}
			st, out := postImport(t, s.url, bytes.NewReader(c.full))
			if st != 201 || out.Turns != n {
				t.Fatalf("import again: %d %+v", st, out)
			}
			if ss := sessions(t, s.url); len(ss) != 1 || turnSeq(t, s.url, out.Session.ID) != n {
				t.Errorf("after the import: sessions %v; want one session of %d turns", ss, n)
			}
			s.stop(t)
		})
	}
}

// turnSeq returns the turn_seq of session's active branch.
func turnSeq(t *testing.T, url, session string) uint64 {
	t.Helper()
	var bs struct {
		Branches []struct{ ID string }
	}
	resp, err := http.Get(url + "/v1/sessions/" + session + "/branches")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&bs)
	resp.Body.Close()
	if len(bs.Branches) == 0 {
		return 0
	}
	resp, err = http.Get(url + "/v1/branches/" + bs.Branches[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b struct {
		TurnSeq uint64 `json:"turn_seq"`
	}
	json.NewDecoder(resp.Body).Decode(&b)
	return b.TurnSeq
}

// An export over 8 MiB (server.max_body_bytes) with lines over 64 KiB
// imports, and exports back whole; a title over its limit is refused
// naming it, and lists no session.
func TestImportLargeExport(t *testing.T) {
	t.Parallel()
	s := startServe(t, t.TempDir())
	// Format 1, as main wrote it, then format 2.
	v1 := genV1("large v1", 40, 256<<10)
	if st, out := postImport(t, s.url, bytes.NewReader(v1)); st != 201 || out.Turns != 40 {
		t.Fatalf("import of %d bytes in format 1: %d %+v", len(v1), st, out)
	}

	body, end := genExport(t, "large", 40, 0, 256<<10)
	if len(body) < 8<<20 {
		t.Fatalf("the export is %d bytes, want over 8 MiB", len(body))
	}
	st, out := postImport(t, s.url, io.MultiReader(bytes.NewReader(body), bytes.NewReader(end)))
	if st != 201 || out.Turns != 40 || out.Session.Title != "large" {
		t.Fatalf("import of %d bytes: %d %+v", len(body)+len(end), st, out)
	}
	resp, err := http.Get(s.url + "/v1/sessions/" + out.Session.ID + "/export")
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(back) < 8<<20 || !bytes.Contains(back, []byte(`"turns":40,`)) {
		t.Errorf("export of the import: %d bytes, %v", len(back), err)
	}

	long, _ := genExport(t, strings.Repeat("t", 257), 1, 0, 10)
	for _, body := range [][]byte{long, genV1(strings.Repeat("t", 257), 1, 10)} {
		st, out = postImport(t, s.url, bytes.NewReader(body))
		if st != 400 || !strings.Contains(out.Error.Message, "title: 257 bytes, limit 256") {
			t.Errorf("a title of 257 bytes: %d %+v, want 400 naming the title and its limit", st, out)
		}
	}
	if ss := sessions(t, s.url); len(ss) != 2 {
		t.Errorf("sessions %v, want the two imported", ss)
	}
	s.stop(t)
}

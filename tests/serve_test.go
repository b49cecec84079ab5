package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/contextinfinity/ctxinf/client/frame"
	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// server is a running `ctxinf serve`.
type server struct {
	cmd   *exec.Cmd
	url   string
	frame string // the frame protocol's address
	done  chan error
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServe starts `ctxinf serve` on dir, with the extra environment
// variables, and waits until it is ready.
func startServe(t *testing.T, dir string, extra ...string) *server {
	t.Helper()
	return startServeLogged(t, dir, io.Discard, extra...)
}

// startServeLogged is startServe with the server's stderr also written to
// stderr. A free port found can be taken by another test's server before
// this one binds it: it is tried again on other ports.
func startServeLogged(t *testing.T, dir string, stderr io.Writer, extra ...string) *server {
	t.Helper()
	for attempt := 1; ; attempt++ {
		var out lockedBuffer
		s, err := launchServe(t, dir, "127.0.0.1:"+strconv.Itoa(freePort(t)), nil, io.MultiWriter(stderr, &out), extra...)
		if err == nil {
			return s
		}
		if attempt == 3 || !strings.Contains(out.String(), "address already in use") {
			t.Fatal(err)
		}
	}
}

// launchServe starts ctxinf serve on HTTP address addr, with serve's
// extra arguments args, and returns its failure rather than ending the
// test: it may run on a goroutine of the test's.
func launchServe(t *testing.T, dir, addr string, args []string, stderr io.Writer, extra ...string) (*server, error) {
	frameAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(binary, append([]string{"serve", "--addr", addr}, args...)...)
	cmd.Env = env(dir, append([]string{"CTX_SERVER_FRAME_ADDR=" + frameAddr}, extra...)...)
	cmd.Stderr = io.MultiWriter(stderr, os.Stderr)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, url: "http://" + addr, frame: frameAddr, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-s.done
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("ctxinf serve exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("ctxinf serve not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("ctxinf serve after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ctxinf serve did not stop on SIGTERM")
	}
}

// An application using the official Go client gets managed context by
// changing its base URL: each request's newest user message is a turn on
// the conversation's branch, which the runtime remembers across
// requests, streaming or not, over both APIs.
func TestProxyWithOpenAIGoClient(t *testing.T) {
	dir := t.TempDir()
	s := startServe(t, dir)
	t.Setenv("OPENAI_API_KEY", "unused-by-the-proxy")
	t.Setenv("OPENAI_BASE_URL", s.url+"/v1")
	client := openai.NewClient(option.WithBaseURL(s.url+"/v1"), option.WithHeader("X-Ctx-Conversation", "app-user-42"),
		option.WithMaxRetries(0))
	ctx := context.Background()

	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "gpt-5.4-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Remember: the deploy target is eu-west-1.")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(chat.Choices) != 1 || !strings.Contains(chat.Choices[0].Message.Content, "the deploy target is eu-west-1") ||
		chat.Choices[0].FinishReason != "stop" {
		t.Fatalf("chat completion: %+v", chat)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "gpt-5.4-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the deploy target?")},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// The answer names the model that answered (the local model), not
	// the one asked for: the runtime has no model of that name.
	if !strings.HasPrefix(acc.ID, "chatcmpl-") || acc.Model != "local" || acc.Created == 0 ||
		acc.Choices[0].FinishReason != "stop" || acc.Choices[0].Message.Role != "assistant" {
		t.Errorf("streamed chunks: id %q, model %q, created %d, finish %q, role %q", acc.ID, acc.Model, acc.Created,
			acc.Choices[0].FinishReason, acc.Choices[0].Message.Role)
	}
	// The local model reports its context: the first turn is there.
	if got := acc.Choices[0].Message.Content; !strings.Contains(got, "What is the deploy target?") ||
		strings.Contains(got, "0 window messages, 0 pending turns") {
		t.Fatalf("streamed reply %q: the conversation was not kept", got)
	}

	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-5.4-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And the region again?")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "completed" || !strings.Contains(resp.OutputText(), "And the region again?") {
		t.Fatalf("response: %s %q", resp.Status, resp.OutputText())
	}
	rs := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "gpt-5.4-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("One more question.")},
	})
	var deltas strings.Builder
	completed := false
	for seq := int64(0); rs.Next(); seq++ {
		ev := rs.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("event %s: sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		switch ev.Type {
		case "response.output_text.delta":
			if !strings.HasPrefix(ev.ItemID, "msg_") {
				t.Errorf("delta item_id %q", ev.ItemID)
			}
			deltas.WriteString(ev.Delta)
		case "response.completed":
			completed = true
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if !completed || !strings.Contains(deltas.String(), "One more question.") {
		t.Fatalf("streamed response: completed %v, text %q", completed, deltas.String())
	}

	// All four turns are one conversation in the runtime.
	r, err := http.Get(s.url + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Sessions []struct {
			Title        string
			ActiveBranch string `json:"active_branch"`
		}
	}
	_ = json.NewDecoder(r.Body).Decode(&list)
	r.Body.Close()
	// Titled with its first message, never with its key.
	if len(list.Sessions) != 1 || list.Sessions[0].Title != "Remember: the deploy target is eu-west-1." {
		t.Fatalf("sessions: %+v", list)
	}

	// A response that has ended is durable: killed at once, the server
	// comes back with every exchange (a proxied turn's acceptance is
	// committed with its response: server.proxy_commit_within).
	_ = s.cmd.Process.Kill()
	<-s.done
	s = startServe(t, dir)
	r, err = http.Get(s.url + "/v1/branches/" + list.Sessions[0].ActiveBranch + "/history?limit=50")
	if err != nil {
		t.Fatal(err)
	}
	var hist struct {
		Entries []struct {
			Message messages.Message `json:"message"`
		} `json:"entries"`
	}
	err = json.NewDecoder(r.Body).Decode(&hist)
	r.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, e := range hist.Entries {
		roles = append(roles, e.Message.Role.String())
	}
	if want := "user assistant user assistant user assistant user assistant"; strings.Join(roles, " ") != want ||
		hist.Entries[6].Message.RenderedText != "One more question." {
		t.Fatalf("after SIGKILL: history roles %v, want %s", roles, want)
	}
	s.stop(t)
}

// The same with the openai package from npm, as a Node application would
// use it (installed into a temporary directory; skipped without npm).
func TestProxyWithOpenAINodeClient(t *testing.T) {
	t.Parallel()
	npm, err := exec.LookPath("npm")
	node, err2 := exec.LookPath("node")
	if err != nil || err2 != nil {
		t.Skip("npm and node are needed for this test (apt-get install npm)")
	}
	work := t.TempDir()
	install := exec.Command(npm, "install", "--silent", "--no-audit", "--no-fund", "openai@5")
	install.Dir = work
	if out, err := install.CombinedOutput(); err != nil {
		t.Skipf("npm install openai failed (no registry?): %v\n%s", err, out)
	}
	s := startServe(t, t.TempDir())
	script := `
const OpenAI = require("openai");
const client = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "unused", defaultHeaders: { "X-Ctx-Conversation": "node-app" }, maxRetries: 0 });
(async () => {
  const c = await client.chat.completions.create({ model: "gpt-5.4-mini", messages: [{ role: "user", content: "Remember the code word: bluebird." }] });
  let streamed = "";
  const s = await client.chat.completions.create({ model: "gpt-5.4-mini", stream: true, messages: [{ role: "user", content: "What was the code word?" }] });
  for await (const chunk of s) streamed += chunk.choices[0]?.delta?.content || "";
  const r = await client.responses.create({ model: "gpt-5.4-mini", input: "Thanks." });
  console.log(JSON.stringify({ first: c.choices[0].message.content, streamed, response: r.output_text }));
})().catch((e) => { console.error(e); process.exit(1); });
`
	if err := os.WriteFile(filepath.Join(work, "app.js"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "app.js", s.url)
	cmd.Dir = work
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node app: %v\n%s", err, out)
	}
	var got struct{ First, Streamed, Response string }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node output %q: %v", out, err)
	}
	if !strings.Contains(got.First, "bluebird") || !strings.Contains(got.Streamed, "What was the code word?") ||
		strings.Contains(got.Streamed, "0 window messages, 0 pending turns") || !strings.Contains(got.Response, "Thanks.") {
		t.Fatalf("node client got %+v", got)
	}
	s.stop(t)
}

// The binary frame protocol serves the same store: a client makes its own
// branches and appends to them; the runtime's branches it may read, not
// write.
func TestServeFrameProtocol(t *testing.T) {
	t.Parallel()
	s := startServe(t, t.TempDir())
	ctx := context.Background()
	c, err := frame.Dial(ctx, s.frame)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := messages.NewID[messages.BranchID](time.Now())
	if _, err := c.CreateBranch(ctx, persistence.BranchSpec{ID: b}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.Append(ctx, b, persistence.AppendRequest{Payload: []byte(strconv.Itoa(i)), TypeTag: 1}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.GetLast(ctx, b, 64)
	if err != nil || len(page.Nodes) != 3 {
		t.Fatalf("GetLast: %+v, %v", page, err)
	}
	// A runtime branch, made over HTTP: readable, not writable.
	resp, err := http.Post(s.url+"/v1/sessions", "application/json", strings.NewReader(`{"title":"rt"}`))
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Branch struct{ ID messages.BranchID }
	}
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if _, err := c.Head(ctx, created.Branch.ID); err != nil {
		t.Errorf("head of a runtime branch: %v", err)
	}
	if _, err := c.Append(ctx, created.Branch.ID, persistence.AppendRequest{Payload: []byte("x"), TypeTag: 1}); err == nil ||
		!strings.Contains(err.Error(), "belongs to the runtime") {
		t.Errorf("append to a runtime branch: %v", err)
	}
	s.stop(t)
}

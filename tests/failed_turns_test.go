package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// post sends body as JSON to url and returns the status and the body.
func post(t *testing.T, url, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
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
	return resp.StatusCode, resp.Header, data
}

// lastEvent is the name and data of the last server-sent event of body.
func lastEvent(body []byte) (name, data string) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			name = n
		}
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = d
		}
	}
	return name, data
}

// A turn that fails on the real server answers with the status and code
// of its cause and a message naming it, waited for, streamed and
// proxied: a context over the model's window (configured small here)
// and a model whose API refuses the key (401).
func TestServeFailedTurnsSayWhy(t *testing.T) {
	t.Parallel()
	refuses := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
	}))
	defer refuses.Close()
	s := startServe(t, t.TempDir(), "CTX_MODELS_LOCAL_CONTEXT_LIMIT=1024", "CTX_RUNTIME_MAX_OUTPUT_TOKENS=256",
		"CTX_MODELS_GPT_BASE_URL="+refuses.URL+"/v1", "CTX_MODELS_GPT_API_KEY_ENV=CTXINF_TEST_KEY", "CTXINF_TEST_KEY=sk-wrong",
		"OPENAI_API_KEY=", "OPENAI_BASE_URL=")
	defer s.stop(t)
	huge := strings.Repeat("huge ", 3000)

	for _, tc := range []struct {
		name, model, text string
		status            int
		code              string
		msg               []string
	}{
		{"context too large", "", huge, 422, "context_too_large", []string{"context too large", "user ", "context_limit"}},
		{"provider 401", "gpt", "hello", 502, "provider_auth", []string{"401", "Incorrect API key provided", "server's own API key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, body := post(t, s.url+"/v1/sessions", `{"title":"failing"}`)
			var created struct {
				Branch struct{ ID string }
			}
			if err := json.Unmarshal(body, &created); err != nil || st != 201 {
				t.Fatalf("create session: %d %s", st, body)
			}
			b := s.url + "/v1/branches/" + created.Branch.ID
			if tc.model != "" {
				req, _ := http.NewRequest("PUT", b+"/model", strings.NewReader(`{"model":"`+tc.model+`"}`))
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("select model: %v %v", resp, err)
				}
				resp.Body.Close()
			}
			text, _ := json.Marshal(tc.text)
			says := func(what, m string) {
				t.Helper()
				for _, want := range tc.msg {
					if !strings.Contains(m, want) {
						t.Errorf("%s: %q lacks %q", what, m, want)
					}
				}
			}

			// Waited for: the error of the turn.
			st, hdr, body := post(t, b+"/turns", `{"text":`+string(text)+`}`)
			var e struct {
				Error struct{ Code, Message, Turn string }
			}
			if err := json.Unmarshal(body, &e); err != nil || st != tc.status || e.Error.Code != tc.code || e.Error.Turn == "" ||
				hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("POST turns: %d %s, want %d %s", st, body, tc.status, tc.code)
			}
			says("error", e.Error.Message)
			resp, err := http.Get(b + "/turns/" + e.Error.Turn)
			if err != nil {
				t.Fatal(err)
			}
			var row struct{ Phase, Outcome, Code, Reason string }
			err = json.NewDecoder(resp.Body).Decode(&row)
			resp.Body.Close()
			if err != nil || row.Phase != "failed" || row.Outcome != "failed" || row.Code != tc.code || row.Reason != e.Error.Message {
				t.Errorf("turn row: %+v, %v", row, err)
			}

			// Streamed: the last event is done, saying why.
			st, _, body = post(t, b+"/turns", `{"text":`+string(text)+`,"stream":true}`)
			name, data := lastEvent(body)
			var done struct {
				Phase, Error, Code string
				Outcome            struct{ Kind, Code, Message string }
			}
			if err := json.Unmarshal([]byte(data), &done); err != nil || st != 200 || name != "done" || done.Phase != "failed" ||
				done.Code != tc.code || done.Outcome.Kind != "failed" || done.Outcome.Code != tc.code || done.Outcome.Message != done.Error {
				t.Fatalf("stream: %d, last event %s %q (%v), want done, failed %s", st, name, data, err, tc.code)
			}
			says("done", done.Error)

			// Proxied, streamed or not: the OpenAI API's error shape.
			for _, stream := range []bool{false, true} {
				req := map[string]any{"model": tc.model, "stream": stream, "messages": []any{map[string]string{"role": "user", "content": tc.text}}}
				data, _ := json.Marshal(req)
				st, _, body = post(t, s.url+"/v1/chat/completions", string(data), "X-Ctx-Branch", created.Branch.ID)
				var oe struct {
					Error struct {
						Message, Type string
						Code          string
						Param         *string
					}
				}
				if err := json.Unmarshal(body, &oe); err != nil || st != tc.status || oe.Error.Code != tc.code || oe.Error.Type == "" {
					t.Fatalf("proxy (stream %v): %d %s, want %d %s", stream, st, body, tc.status, tc.code)
				}
				says("proxy", oe.Error.Message)
			}
		})
	}
}

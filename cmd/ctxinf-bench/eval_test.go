package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// eval serve speaks ctxeval/1: appends, flush, queries answered with the
// utterances' ids, a fork that sees its parent only up to the fork point,
// and errors as {"error": ...} lines without ending the session.
func TestEvalServe(t *testing.T) {
	t.Setenv("CTX_STORE_DURABILITY", "relaxed")
	t.Setenv("CTX_RETRIEVAL_EMBEDDER", "hash")
	lines := []string{`{"op":"hello","protocol":"ctxeval/1"}`}
	utter := []string{
		"I adopted a beagle named Biscuit last spring.",
		"My sister lives in Lisbon and teaches chemistry.",
		"We are planning a hiking trip to the Dolomites in July.",
		"I started learning the cello at the community school.",
	}
	for i, u := range utter {
		lines = append(lines, fmt.Sprintf(`{"op":"append","conv":"c1","id":"D1:%d","seq":%d,"speaker":"Ann","text":%q,"ts":"2023-05-08T13:56:00Z","meta":{"session_date":"1:56 pm on 8 May, 2023"}}`, i+1, i, u))
	}
	lines = append(lines,
		`{"op":"flush","conv":"c1"}`,
		`{"op":"query","conv":"c1","qid":"q1","q":"What is the name of Ann's dog?","k":2}`,
		`{"op":"fork","conv":"c1/b","from":"c1","at":"D1:2"}`,
		`{"op":"append","conv":"c1/b","id":"B:1","seq":0,"speaker":"Ann","text":"On this branch my dog is called Pretzel.","ts":"2023-05-09T10:00:00Z"}`,
		`{"op":"flush","conv":"c1/b"}`,
		`{"op":"query","conv":"c1/b","qid":"q2","q":"hiking trip Dolomites","k":10}`,
		`{"op":"query","conv":"c1","qid":"q3","q":"dog called Pretzel","k":10}`,
		`{"op":"append","conv":"c1","id":"D1:1","seq":9,"speaker":"Ann","text":"again","ts":"2023-05-08T13:56:00Z"}`,
		`{"op":"frobnicate"}`,
		`{"op":"close"}`)
	var out, errOut bytes.Buffer
	if code := run([]string{"eval", "serve"}, strings.NewReader(strings.Join(lines, "\n")+"\n"), &out, &errOut); code != 0 {
		t.Fatalf("eval serve exited %d: %s", code, errOut.String())
	}
	var resps []map[string]any
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("response %q: %v", sc.Text(), err)
		}
		resps = append(resps, m)
	}
	if len(resps) != len(lines) {
		t.Fatalf("%d responses to %d requests:\n%s", len(resps), len(lines), out.String())
	}
	ids := func(m map[string]any) []string {
		var out []string
		for _, x := range m["ids"].([]any) {
			out = append(out, x.(string))
		}
		return out
	}
	if resps[0]["ok"] != true || !slices.Contains(resps[0]["caps"].([]any), any("fork")) {
		t.Errorf("hello: %v", resps[0])
	}
	q1 := resps[6]
	if got := ids(q1); q1["qid"] != "q1" || len(got) == 0 || len(got) > 2 || got[0] != "D1:1" {
		t.Errorf("q1: %v", q1)
	}
	// The fork sees D1:1 and D1:2 and its own B:1; never D1:3 or D1:4.
	if got := ids(resps[10]); slices.Contains(got, "D1:3") || slices.Contains(got, "D1:4") {
		t.Errorf("q2 on the fork found the parent's turns after the fork point: %v", got)
	}
	if got := ids(resps[11]); slices.Contains(got, "B:1") {
		t.Errorf("q3 on the parent found the fork's turn: %v", got)
	}
	if e, _ := resps[12]["error"].(string); !strings.Contains(e, `id "D1:1" is appended already`) {
		t.Errorf("a duplicate id: %v", resps[12])
	}
	if e, _ := resps[13]["error"].(string); !strings.Contains(e, `unknown op "frobnicate"`) {
		t.Errorf("an unknown op: %v", resps[13])
	}
	if resps[14]["ok"] != true {
		t.Errorf("close: %v", resps[14])
	}
}

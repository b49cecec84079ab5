package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// eval recall reads a LoCoMo file, imports its conversation and scores
// each question: the search's recall and whether the evidence turns'
// text is in the context the next turn would get. A question about a
// turn still in the verbatim window finds it there; one about an old
// turn only through retrieval.
func TestEvalRecall(t *testing.T) {
	t.Setenv("CTX_STORE_DURABILITY", "relaxed")
	t.Setenv("CTX_RETRIEVAL_EMBEDDER", "hash")
	var turns []string
	for i := range 40 {
		text := fmt.Sprintf("Filler remark number %d about the weather and nothing else.", i)
		switch i {
		case 3:
			text = "I adopted a beagle named Biscuit last spring."
		case 17:
			text = "My sister lives in Lisbon and teaches chemistry."
		}
		turns = append(turns, fmt.Sprintf(`{"speaker":"Ann","dia_id":"D1:%d","text":%q}`, i+1, text))
	}
	data := `[{"sample_id":"conv-x","conversation":{"speaker_a":"Ann","speaker_b":"Bo",
		"session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[` + strings.Join(turns, ",") + `]},
		"qa":[{"question":"What is the name of Ann's beagle?","answer":"Biscuit","evidence":["D1:4"],"category":4},
		      {"question":"Where does Ann's sister teach chemistry?","answer":"Lisbon","evidence":["D:1:18"],"category":1},
		      {"question":"What was filler remark 39 about?","answer":"weather","evidence":["D1:40"],"category":4},
		      {"question":"No evidence","answer":"x","evidence":[],"category":2}]}]`
	path := filepath.Join(t.TempDir(), "locomo.json")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	perq := filepath.Join(t.TempDir(), "perq.jsonl")
	var out, errOut bytes.Buffer
	if code := run([]string{"eval", "recall", "--data", path, "--json", "--out", perq}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("eval recall exited %d: %s", code, errOut.String())
	}
	var res struct {
		Overall struct {
			N             int     `json:"n"`
			R10           float64 `json:"recall_at_10"`
			ContextRecall float64 `json:"context_recall"`
			Tokens        float64 `json:"tokens"`
		} `json:"overall"`
		FoundIn map[string]float64 `json:"found_in"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if res.Overall.N != 3 || res.Overall.R10 < 0.66 || res.Overall.ContextRecall != 1 || res.Overall.Tokens <= 0 {
		t.Errorf("overall = %+v, want 3 questions, R@10 at least 2/3, context recall 1, tokens counted", res.Overall)
	}
	if res.FoundIn["retrieved"] < 0.66 || res.FoundIn["window"] < 0.33 {
		t.Errorf("found in %v, want two thirds retrieved and a third in the window", res.FoundIn)
	}
	lines, err := os.ReadFile(perq)
	if err != nil || strings.Count(string(lines), "\n") != 3 || !strings.Contains(string(lines), `"found":["retrieved"]`) {
		t.Errorf("per-question results %q, %v", lines, err)
	}

	out.Reset()
	if code := run([]string{"eval", "recall", "--data", path, "--curve", "retrieval.top_k=1,2"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("eval recall --curve exited %d: %s", code, errOut.String())
	}
	if got := out.String(); !strings.Contains(got, "retrieval.top_k") || strings.Count(got, "\n") != 3 {
		t.Errorf("curve:\n%s", got)
	}
	errOut.Reset()
	if code := run([]string{"eval", "recall", "--data", path, "--curve", "retrieval.bogus=1"}, strings.NewReader(""), &out, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), "retrieval.top_k") {
		t.Errorf("an unknown curve key: exit %d, %s", code, errOut.String())
	}
}

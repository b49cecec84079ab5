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

// eval memtools asks each question of a scripted model without and with
// search_memory: with automatic retrieval bringing back one turn, the
// question about one old turn has it in its context and is answered by
// both, without searching; the one about two has one outside, and only
// the model with the tool finds it, in one more step, at a cost in
// tokens.
func TestEvalMemoryTools(t *testing.T) {
	t.Setenv("CTX_STORE_DURABILITY", "relaxed")
	t.Setenv("CTX_RETRIEVAL_EMBEDDER", "hash")
	for k, v := range map[string]string{"CTX_RETRIEVAL_TOP_K": "1", "CTX_RETRIEVAL_MAX_K": "1", "CTX_RETRIEVAL_NEIGHBOURS": "0"} {
		t.Setenv(k, v)
	}
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
		      {"question":"What is the name of Ann's beagle, and where does her sister teach chemistry?","answer":"Biscuit, Lisbon","evidence":["D1:4","D1:18"],"category":1},
		      {"question":"Adversarial","answer":"x","evidence":["D1:1"],"category":5}]}]`
	path := filepath.Join(t.TempDir(), "locomo.json")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"eval", "memtools", "--data", path, "--json"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("eval memtools exited %d: %s", code, errOut.String())
	}
	var res struct {
		Questions   int     `json:"questions"`
		Outside     int     `json:"outside_context"`
		PlainRate   float64 `json:"answer_rate_plain"`
		ToolsRate   float64 `json:"answer_rate_tools"`
		ToolsOut    float64 `json:"answer_rate_outside_tools"`
		Searched    int     `json:"searched"`
		ExtraSteps  float64 `json:"extra_steps"`
		ExtraTokens int     `json:"extra_input_tokens_p50"`
		Defs        int     `json:"definition_tokens"`
		Unused      int     `json:"unused_extra_input_tokens_p50"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if res.Questions != 2 || res.Outside != 1 || res.Searched != 1 || res.ExtraSteps != 1 {
		t.Errorf("result %+v: want 2 questions, 1 outside the context and searched, in one extra step", res)
	}
	if res.PlainRate != 0.5 || res.ToolsRate != 1 || res.ToolsOut != 1 {
		t.Errorf("answer rates %+v: want half without the tools, all with them", res)
	}
	if res.Defs <= 0 || res.Unused != res.Defs || res.ExtraTokens <= res.Defs {
		t.Errorf("tokens %+v: want the definitions counted, a turn that did not search to cost them alone, one that did more", res)
	}
	out.Reset()
	if code := run([]string{"eval", "memtools", "--data", path}, strings.NewReader(""), &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "evidence outside the context (1)") || !strings.Contains(out.String(), "extra provider steps") {
		t.Errorf("eval memtools printed (exit %d):\n%s", code, out.String())
	}
}

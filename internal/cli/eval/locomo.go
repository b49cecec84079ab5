package eval

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The LoCoMo file format (snap-research/LoCoMo's data/locomo10.json, and
// the dev split in ../shared/datasets/locomo-dev): a JSON array of
// samples, each a conversation of dated sessions of dialog turns and the
// questions asked about it with the turns that hold each answer. The
// reader mirrors ../shared/eval/locomo-eval's, so that both score the
// same questions against the same evidence.

// locomoTurn is one utterance of a conversation.
type locomoTurn struct {
	ID          string // dia_id, e.g. "D3:12"
	Session     int
	SessionDate string // the raw session_<n>_date_time
	TS          time.Time
	Speaker     string
	Text        string
	BlipCaption string
}

// locomoQA is a question with its normalized evidence: the ids of the
// conversation's turns that hold the answer.
type locomoQA struct {
	QID      string
	Question string
	Category int
	Evidence []string
}

type locomoConv struct {
	ID    string
	Turns []locomoTurn
	QAs   []locomoQA
	byID  map[string]int
}

var (
	locomoSession = regexp.MustCompile(`^session_(\d+)$`)
	locomoDiaID   = regexp.MustCompile(`D:?(\d+):(\d+)`)
)

// locomoDateLayout is the format of LoCoMo's session dates ("1:56 pm on
// 8 May, 2023").
const locomoDateLayout = "3:04 pm on 2 January, 2006"

// loadLocomo reads the conversations of a LoCoMo file. Evidence strings
// are normalized as the evaluator does ("D8:6; D9:17", "D:11:26",
// "D30:05"), and ids that name no turn are dropped.
func loadLocomo(path string) ([]*locomoConv, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var samples []struct {
		SampleID     string                     `json:"sample_id"`
		Conversation map[string]json.RawMessage `json:"conversation"`
		QA           []struct {
			Question string   `json:"question"`
			Evidence []string `json:"evidence"`
			Category int      `json:"category"`
		} `json:"qa"`
	}
	if err := json.Unmarshal(data, &samples); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	var convs []*locomoConv
	for _, s := range samples {
		c := &locomoConv{ID: s.SampleID, byID: map[string]int{}}
		var sessions []int
		for k := range s.Conversation {
			if m := locomoSession.FindStringSubmatch(k); m != nil {
				n, _ := strconv.Atoi(m[1])
				sessions = append(sessions, n)
			}
		}
		slices.Sort(sessions)
		for _, n := range sessions {
			var date string
			_ = json.Unmarshal(s.Conversation[fmt.Sprintf("session_%d_date_time", n)], &date)
			var turns []struct {
				Speaker     string `json:"speaker"`
				DiaID       string `json:"dia_id"`
				Text        string `json:"text"`
				BlipCaption string `json:"blip_caption"`
			}
			if err := json.Unmarshal(s.Conversation[fmt.Sprintf("session_%d", n)], &turns); err != nil {
				return nil, fmt.Errorf("%s: session_%d: %w", s.SampleID, n, err)
			}
			ts, _ := time.Parse(locomoDateLayout, strings.TrimSpace(date))
			for _, t := range turns {
				c.byID[t.DiaID] = len(c.Turns)
				c.Turns = append(c.Turns, locomoTurn{ID: t.DiaID, Session: n, SessionDate: date, TS: ts,
					Speaker: t.Speaker, Text: t.Text, BlipCaption: t.BlipCaption})
			}
		}
		for i, q := range s.QA {
			qa := locomoQA{QID: fmt.Sprintf("%s#%d", s.SampleID, i), Question: q.Question, Category: q.Category}
			seen := map[string]bool{}
			for _, raw := range q.Evidence {
				for _, m := range locomoDiaID.FindAllStringSubmatch(raw, -1) {
					sn, _ := strconv.Atoi(m[1])
					tn, _ := strconv.Atoi(m[2])
					id := fmt.Sprintf("D%d:%d", sn, tn)
					if _, ok := c.byID[id]; ok && !seen[id] {
						seen[id] = true
						qa.Evidence = append(qa.Evidence, id)
					}
				}
			}
			c.QAs = append(c.QAs, qa)
		}
		convs = append(convs, c)
	}
	return convs, nil
}

// turn returns the turn of id.
func (c *locomoConv) turn(id string) locomoTurn { return c.Turns[c.byID[id]] }

// locomoCategory names LoCoMo's question categories.
func locomoCategory(c int) string {
	switch c {
	case 1:
		return "multi-hop"
	case 2:
		return "temporal"
	case 3:
		return "open-domain"
	case 4:
		return "single-hop"
	case 5:
		return "adversarial"
	}
	return "unknown"
}

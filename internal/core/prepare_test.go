package core

import "testing"

func TestShrinkDue(t *testing.T) {
	t.Parallel()
	shrunk := AssemblyReport{Shrink: []ShrinkStep{{Step: StepDropChunk}, {Step: StepShrinkSummary, Target: 300}}}
	other := AssemblyReport{Shrink: []ShrinkStep{{Step: StepDropChunk}}}
	tests := []struct {
		name   string
		rep    AssemblyReport
		asked  uint64
		want   AskShrink
		wantOK bool
	}{
		{"the summary shrunk", shrunk, 0, AskShrink{Turn: T2, Epoch: 1, Summary: "summary 1", Target: 300}, true},
		{"asked for an older summary", shrunk, 1, AskShrink{Turn: T2, Epoch: 1, Summary: "summary 1", Target: 300}, true},
		{"this summary asked already", shrunk, 2, AskShrink{}, false},
		{"the summary not shrunk", other, 0, AskShrink{}, false},
		{"nothing shrunk", AssemblyReport{}, 0, AskShrink{}, false},
	}
	for _, tc := range tests {
		s := newScript(t).run(append(committed[:5:5], "submit T2")...)
		got, ok := s.b.ShrinkDue(T2, tc.rep, tc.asked)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: ShrinkDue(T2, %v, %d) = %+v, %v, want %+v, %v", tc.name, tc.rep.Shrink, tc.asked, got, ok, tc.want, tc.wantOK)
		}
	}
}

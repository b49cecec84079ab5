package actors

import (
	"errors"
	"fmt"
	"time"
)

// check reports every setting Open requires that cfg leaves unset or out
// of range, each naming its field. Open takes no defaults of its own:
// the configuration's (internal/config) are set by the one builder from
// it, which also fills a Config a library caller builds (ctxinf.Open).
func (cfg *Config) check() error {
	var errs []error
	need := func(field string, ok bool, v any) {
		if !ok {
			errs = append(errs, fmt.Errorf("actors: Config.%s: %v, want more than 0", field, v))
		}
	}
	durations := []struct {
		field string
		v     time.Duration
	}{
		{"RequestTimeout", cfg.RequestTimeout}, {"IdleAfter", cfg.IdleAfter}, {"StepTimeout", cfg.StepTimeout},
		{"ToolTimeout", cfg.ToolTimeout}, {"RestartWindow", cfg.RestartWindow},
	}
	for _, d := range durations {
		need(d.field, d.v > 0, d.v)
	}
	counts := []struct {
		field string
		v     int
	}{
		{"SnapshotEvery", cfg.SnapshotEvery}, {"MaxOutputTokens", cfg.MaxOutputTokens}, {"RetrievalMax", cfg.RetrievalMax},
		{"ChunkMax", cfg.ChunkMax}, {"MaxToolSteps", cfg.MaxToolSteps}, {"MaxRestarts", cfg.MaxRestarts},
	}
	for _, c := range counts {
		need(c.field, c.v > 0, c.v)
	}
	if cfg.Retention.Interval > 0 {
		need("Retention.Batch", cfg.Retention.Batch > 0, cfg.Retention.Batch)
	} else if cfg.Retention.Interval == 0 {
		errs = append(errs, errors.New("actors: Config.Retention.Interval: 0, want a period (negative: the job never runs)"))
	}
	for _, f := range []struct {
		field string
		v     float64
	}{{"FoldAtFraction", cfg.FoldAtFraction}, {"MaxPinnedShare", cfg.MaxPinnedShare}} {
		if !(f.v > 0 && f.v <= 1) {
			errs = append(errs, fmt.Errorf("actors: Config.%s: %g, want more than 0 and at most 1", f.field, f.v))
		}
	}
	for _, p := range []struct {
		field string
		nil   bool
	}{{"Retry", cfg.Retry == nil}, {"Fold", cfg.Fold == nil}, {"Rank", cfg.Rank == nil}} {
		if p.nil {
			errs = append(errs, fmt.Errorf("actors: Config.%s: nil, want the policy", p.field))
		}
	}
	if err := cfg.Journal.Check(); err != nil {
		errs = append(errs, fmt.Errorf("actors: Config.Journal: %w", err))
	}
	return errors.Join(errs...)
}

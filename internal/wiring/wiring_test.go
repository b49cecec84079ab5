package wiring

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/core"
)

// Runtime sets every field of actors.Config that a configuration key
// maps to, so that actors.Open's own fallbacks are never what the binary
// or a library runtime gets. The fields left zero here have no key.
func TestRuntimeSetsEveryField(t *testing.T) {
	noKey := map[string]bool{
		"Postgres":           true, // store.backend badger
		"Redact":             true, // a Go function: ctxinf.Options.Redact
		"SystemInstructions": true, // actors.DefaultSystemInstructions
		"Placement":          true, // serve --cluster
		"Now":                true, // the clock: time.Now
		"IndexFlushDelay":    true,
		"Shrink":             true, // librarian.model "": the deterministic shrink
		"SafetyMargin":       true, // context.safety_margin_tokens: 0
		"ChunkOverlap":       true, // retrieval.chunk_overlap_tokens: 0
		"NoRetrieval":        true, // retrieval.enabled: true
		"SkipFinalizedFsync": true, // stream.fsync_finalized: true
		"ToolMode":           true, // tools.mode: disabled
		"MemoryTools":        true, // memory.tools: false
		"Redaction":          true, // redaction.patterns: none
		"Faults":             true, // ctxinf chaos's kill switch, never a key
	}
	fromEnv := map[string]bool{"Logger": true, "Unavailable": true} // Env's, and the keys it holds
	c := config.Default()
	c.DataDir = t.TempDir()
	c.DefaultModel = "local"
	cfg, err := Runtime(c, Env{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(cfg)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if strings.HasPrefix(name, "Observe") || fromEnv[name] {
			continue // the server's metrics' hooks; what Env gives
		}
		if zero := v.Field(i).IsZero(); zero != noKey[name] {
			t.Errorf("Runtime(config.Default()).%s: zero = %v, want %v", name, zero, noKey[name])
		}
	}
}

// Fill takes what it sets from config.Default() as Runtime maps it: a
// Config filled from nothing has Runtime's values in every field Fill
// sets, but the retention job's interval (Runtime leaves the job to the
// command that serves).
func TestFillIsRuntimeDefaults(t *testing.T) {
	c := config.Default()
	c.DataDir = t.TempDir()
	c.DefaultModel = "local"
	want, err := Runtime(c, Env{})
	if err != nil {
		t.Fatal(err)
	}
	// Of the retention, Fill sets how the job runs (interval, batch),
	// not how long sessions are kept.
	want.Retention = actors.RetentionPolicy{Interval: c.Retention.Interval, Batch: want.Retention.Batch}
	got := Fill(actors.Config{})
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	set := 0
	for i := range gv.NumField() {
		if gv.Field(i).IsZero() {
			continue
		}
		set++
		name := gv.Type().Field(i).Name
		if g, w := gv.Field(i).Interface(), wv.Field(i).Interface(); !reflect.DeepEqual(g, w) {
			t.Errorf("Fill(actors.Config{}).%s = %+v, want Runtime's %+v", name, g, w)
		}
	}
	if set == 0 {
		t.Error("Fill(actors.Config{}) set nothing")
	}
	// What is set is kept.
	if got := Fill(actors.Config{RequestTimeout: time.Second, Fold: &core.Policy{}}); got.RequestTimeout != time.Second || *got.Fold != (core.Policy{}) {
		t.Errorf("Fill kept RequestTimeout %v, Fold %+v; want 1s, the zero policy", got.RequestTimeout, *got.Fold)
	}
}

// The configuration's defaults map onto policies their packages accept:
// the ranker's, the stream journals'.
func TestDefaultPoliciesAreValid(t *testing.T) {
	c := config.Default()
	if err := RankOptions(c.Retrieval).Validate(); err != nil {
		t.Errorf("RankOptions(config.Default().Retrieval).Validate() = %v", err)
	}
	if err := settings(c).Journal.Check(); err != nil {
		t.Errorf("the journal policy of config.Default().Stream: %v", err)
	}
}

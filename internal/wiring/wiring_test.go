package wiring

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/config"
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

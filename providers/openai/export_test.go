package openai

import (
	"testing"
	"time"
)

// SetDrainFor sets how long a stream's body is drained after its last
// event, for the rest of t; t must not run in parallel.
func SetDrainFor(t *testing.T, d time.Duration) {
	old := drainFor
	drainFor = d
	t.Cleanup(func() { drainFor = old })
}

package actors_test

import (
	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/wiring"
)

// The package's tests open their runtimes with the settings they leave
// unset taken from config.yaml's defaults, as ctxinf.Open takes them
// (wiring.Fill). wiring imports actors, so only this external test file
// can import it; it hands wiring.Fill to the package's own tests.
func init() { actors.FillConfig = wiring.Fill }

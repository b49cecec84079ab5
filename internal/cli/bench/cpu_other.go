//go:build !unix

package bench

import "time"

// processCPU returns the CPU time this process used so far: not known
// here.
func processCPU() (time.Duration, bool) { return 0, false }

// Package search is `ctxinf search`: a branch's hybrid retrieval, and
// forcing its hits into the next turn.
package search

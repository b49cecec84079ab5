// Package serve is `ctxinf serve`: the HTTP API and the frame protocol
// over the runtime on the data directory, alone or as a member of a
// cluster.
package serve

// Package inspect is `ctxinf inspect`: what a data directory holds,
// read from its store or from the server that owns it.
package inspect

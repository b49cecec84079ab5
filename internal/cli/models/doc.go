// Package models is `ctxinf models convert`: word vectors converted to
// the static embedder's format (make models).
package models

// Package eval is `ctxinf-bench eval serve`: a retriever speaking the
// ctxeval/1 protocol on stdin and stdout, through the product's paths,
// for the project's LoCoMo evaluation.
package eval

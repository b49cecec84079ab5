// Package eval is the project's LoCoMo evaluation through the product's
// paths: `ctxinf-bench eval serve`, a retriever speaking the ctxeval/1
// protocol on stdin and stdout, and `ctxinf-bench eval recall`, which
// scores in one process what reaches the model (context recall and
// tokens) beside the search's recall.
package eval

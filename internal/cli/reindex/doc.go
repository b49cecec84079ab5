// Package reindex is `ctxinf reindex`: committed turns chunked and
// indexed again, idempotently.
package reindex

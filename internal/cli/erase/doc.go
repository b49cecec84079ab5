// Package erase is `ctxinf delete`: the hard delete of a session or a
// branch, for good. (The package is not named delete, Go's builtin.)
package erase

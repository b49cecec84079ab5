// Package chaos is `ctxinf chaos`: turns driven on many branches while
// actors of every kind are killed, then a check that nothing acknowledged
// was lost or committed twice and that every head is valid.
package chaos

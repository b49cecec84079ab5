// Package contextdebug is `ctxinf context debug`: the exact context a
// turn's model saw, or the next turn would see, section by section.
package contextdebug

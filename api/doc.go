// Package api holds the types of the HTTP/JSON API of `ctxinf serve`:
// the bodies of its requests and answers, the events of a streamed turn
// and the codes of its errors. The server writes these types and the Go
// client (package client) reads them, so the two cannot drift apart; a
// program that speaks the API needs this package and messages only, not
// the runtime or its storage.
//
// The server maps its storage rows and runtime values to these types in
// one place (internal/server's wire.go): a change of the storage layer
// does not change the API's JSON.
package api

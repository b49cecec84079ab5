package server

import (
	"net/http"

	"github.com/contextinfinity/ctxinf/messages"
)

// ProxyMemoryToolsHeader sets, with a proxied request's new turn, the
// memory tools setting of its conversation's branch: "on" or "off" (the
// turn and the ones after it are offered the memory tools or not,
// whatever the server's config says), or "default" (as the config says
// for the branch's model). The branch keeps it for its later turns, as
// PUT /v1/branches/{b}/memory_tools does; a request without the header
// leaves the branch's setting as it is, and a request of tool results
// changes nothing (its turn keeps the setting it was accepted with).
// Any other value refuses the request (400) before its conversation is
// found or made.
const ProxyMemoryToolsHeader = "X-Ctx-Memory-Tools"

// proxyMemoryTools returns the setting r's ProxyMemoryToolsHeader names,
// or nil when it has none.
func proxyMemoryTools(r *http.Request) (*messages.MemoryTools, error) {
	h := r.Header.Values(ProxyMemoryToolsHeader)
	switch {
	case len(h) == 0:
		return nil, nil
	case len(h) > 1:
		return nil, invalid("%s header: sent %d times; send it once (default, on or off)", ProxyMemoryToolsHeader, len(h))
	}
	m, err := parseMemoryTools(ProxyMemoryToolsHeader+" header", h[0])
	if err != nil {
		return nil, err
	}
	return &m, nil
}

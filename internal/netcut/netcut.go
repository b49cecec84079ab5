// Package netcut is a TCP proxy on loopback that can cut its
// connections: an outage of the server behind it, as its clients see
// one (a database failing over, a network split), without touching the
// server. `ctxinf bench cluster --outages` and the cluster tests put one
// in front of PostgreSQL.
package netcut

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy forwards each connection it accepts to its target, until Cut.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	down  bool
	cuts  int
	wg    sync.WaitGroup
	close chan struct{}
}

// Listen starts a proxy on a free loopback port that forwards to target
// (host:port).
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, close: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address (host:port): its clients dial it instead
// of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut ends every connection through the proxy, and makes it end each
// new one at once (its client reads EOF) until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down {
		p.cuts++
	}
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore forwards new connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// Cuts returns how many times Cut took the proxy down.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Close stops the proxy and ends its connections.
func (p *Proxy) Close() error {
	close(p.close)
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-p.close:
				return
			default:
				continue
			}
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.pipe(c)
	}
}

// track records c as open; false while the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

// pipe copies between client and a new connection to the target until
// either side ends (or Cut ends both).
func (p *Proxy) pipe(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(server) {
		if server != nil {
			server.Close()
		}
		p.untrack(client)
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(server, client); done <- struct{}{} }()
	go func() { io.Copy(client, server); done <- struct{}{} }()
	<-done
	p.untrack(client, server)
	<-done
}

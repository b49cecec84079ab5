package cluster

import (
	"crypto/tls"
	"crypto/x509"

	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/labstack/echo"
)

// MemberTLS is the mutual TLS of the members' actor systems: Server for
// the port this member listens on (it requires a client certificate that
// ClientCAs verifies), Client for its connections to the others (it
// presents its certificate and verifies theirs against RootCAs).
type MemberTLS struct {
	Server, Client *tls.Config
}

// LoadTLS reads a member's certificate and key (PEM) and the CA
// certificate(s) that sign every member's: each member presents its
// certificate to the others, which accept a member only with a
// certificate that CA signed. A member's certificate names the host the
// others dial it at (cluster.host) among its subject alternative names,
// and is good for both server and client authentication.
func LoadTLS(certFile, keyFile, caFile string) (*MemberTLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_cert_file %s, cluster.tls_key_file %s: %w", certFile, keyFile, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cluster.tls_ca_file %s: no PEM certificate in it", caFile)
	}
	return &MemberTLS{
		Server: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
			MinVersion: tls.VersionTLS13},
		Client: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13},
	}, nil
}

// listenMembership opens the membership endpoint's listener on cfg.Host
// (not every interface, as protoactor's automanaged provider does by
// itself), answering only the addresses of the peers' hosts and loopback:
// what it tells (this member's actor-system address) is the peers'
// business only.
func listenMembership(cfg Config) (*echo.Echo, error) {
	allowed := map[string]bool{}
	for _, p := range cfg.Peers {
		host, _, _ := net.SplitHostPort(p)
		ips, err := net.LookupIP(host)
		if err != nil {
			return nil, fmt.Errorf("cluster.peers %q: %w", p, err)
		}
		for _, ip := range ips {
			allowed[ip.String()] = true
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.ManagePort)))
	if err != nil {
		return nil, fmt.Errorf("cluster: membership port (cluster.host, cluster.manage_port): %w", err)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Listener = &peersOnly{Listener: l, allowed: allowed}
	return e, nil
}

// peersOnly is a listener that closes the connections of addresses not
// allowed (but loopback).
type peersOnly struct {
	net.Listener
	allowed map[string]bool
}

func (l *peersOnly) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr, ok := c.RemoteAddr().(*net.TCPAddr)
		if ok && (addr.IP.IsLoopback() || l.allowed[addr.IP.String()]) {
			return c, nil
		}
		c.Close()
	}
}

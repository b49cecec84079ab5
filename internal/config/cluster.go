package config

import (
	"net"
	"net/url"
	"reflect"
	"strings"
	"time"
)

// ClusterConfig is `ctxinf serve --cluster` (docs/CLUSTER.md): members
// that share one PostgreSQL store (store.backend: postgres) and place
// each session on one of them.
type ClusterConfig struct {
	// Enabled joins the cluster at `ctxinf serve` (as --cluster does).
	Enabled bool `mapstructure:"enabled"`
	// Name is the cluster's name: members answer only their own
	// cluster's.
	Name string `mapstructure:"name"`
	// Host and Port are where this member's actor system listens for the
	// other members (gRPC); Host must be an address they can dial.
	Host string `mapstructure:"host"`
	Port int    `mapstructure:"port"`
	// ManagePort is the membership endpoint's port (protoactor's
	// automanaged provider). It listens on every interface.
	ManagePort int `mapstructure:"manage_port"`
	// Peers are every member's host:manage_port, this one's included. In
	// the environment, CTX_CLUSTER_PEERS is comma-separated.
	Peers []string `mapstructure:"peers"`
	// AdvertiseURL is the URL other members reach this one's HTTP API at
	// (they forward the requests for the sessions it owns there); ""
	// means http:// and server.addr.
	AdvertiseURL string `mapstructure:"advertise_url"`
	// Refresh is how often a member polls the others; a member that
	// stops answering leaves the cluster within about Refresh + 2s.
	Refresh time.Duration `mapstructure:"refresh"`
	// JoinTimeout is how long `ctxinf serve` waits to see itself in the
	// cluster before it serves anyway (its requests are forwarded or
	// answered 503 until it joins).
	JoinTimeout time.Duration `mapstructure:"join_timeout"`
	// TLSCertFile, TLSKeyFile and TLSCAFile are mutual TLS between the
	// members' actor systems: this member's certificate and key and the
	// CA that signs every member's (PEM); all three or none.
	TLSCertFile string `mapstructure:"tls_cert_file"`
	TLSKeyFile  string `mapstructure:"tls_key_file"`
	TLSCAFile   string `mapstructure:"tls_ca_file"`
}

func defaultCluster() ClusterConfig {
	return ClusterConfig{Enabled: false, Name: "ctxinf", Host: "127.0.0.1", Port: 8090, ManagePort: 6330,
		Peers: []string{"127.0.0.1:6330"}, AdvertiseURL: "", Refresh: time.Second, JoinTimeout: 30 * time.Second}
}

var stringsType = reflect.TypeFor[[]string]()

// toStrings reads a list from the environment: comma-separated.
func toStrings(s string) (any, error) {
	out := []string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out, nil
}

func (c ClusterConfig) validate(p *problems, prefix string) {
	if c.Name == "" {
		p.addf("%sname is empty", prefix)
	}
	if c.Host == "" {
		p.addf("%shost is empty", prefix)
	}
	p.inRange(prefix+"port", int64(c.Port), 1, 65535)
	p.inRange(prefix+"manage_port", int64(c.ManagePort), 1, 65535)
	if c.Enabled && len(c.Peers) == 0 {
		p.addf("%speers is empty: list every member's host:manage_port, this one's included", prefix)
	}
	for _, peer := range c.Peers {
		if _, _, err := net.SplitHostPort(peer); err != nil {
			p.addf("%speers: %q is not host:port", prefix, peer)
		}
	}
	if c.AdvertiseURL != "" {
		if u, err := url.Parse(c.AdvertiseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.addf("%sadvertise_url: %q is not an http:// or https:// URL with a host", prefix, c.AdvertiseURL)
		}
	}
	p.durationIn(prefix+"refresh", c.Refresh, 100*time.Millisecond, time.Minute)
	p.durationIn(prefix+"join_timeout", c.JoinTimeout, time.Second, time.Hour)
	n := 0
	for _, f := range []string{c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile} {
		if f != "" {
			n++
		}
	}
	if n != 0 && n != 3 {
		p.addf("%stls_cert_file, %stls_key_file and %stls_ca_file: set all three or none", prefix, prefix, prefix)
	}
}

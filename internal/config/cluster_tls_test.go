package config

import (
	"strings"
	"testing"
)

// Mutual TLS between members takes its three files together.
func TestClusterTLSAllOrNone(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Cluster.TLSCertFile = "/etc/ctxinf/member.crt"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "cluster.tls_cert_file, cluster.tls_key_file and cluster.tls_ca_file: set all three or none") {
		t.Fatalf("Validate with a certificate alone: %v", err)
	}
	c.Cluster.TLSKeyFile, c.Cluster.TLSCAFile = "/etc/ctxinf/member.key", "/etc/ctxinf/ca.crt"
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate with all three: %v", err)
	}
}

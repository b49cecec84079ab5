package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// testCA makes a CA and a member certificate for 127.0.0.1 it signs, as
// PEM files in dir; it returns their paths.
func testCA(t *testing.T, dir, name string) (cert, key, ca string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	memberKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name + " member"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &memberKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(memberKey)
	write := func(file, typ string, b []byte) string {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write(name+".crt", "CERTIFICATE", der), write(name+".key", "EC PRIVATE KEY", keyDER), write(name+"-ca.crt", "CERTIFICATE", caDER)
}

// With cluster TLS, the actor-system port takes only connections that
// present a certificate the members' CA signed: one without a
// certificate, with another CA's, or in plain text is refused; the
// membership port listens on cluster.host and answers there.
func TestMemberTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key, ca := testCA(t, dir, "members")
	otherCert, otherKey, _ := testCA(t, dir, "stranger")
	mtls, err := LoadTLS(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTLS(cert, key, filepath.Join(dir, "missing.crt")); err == nil || !strings.Contains(err.Error(), "cluster.tls_ca_file") {
		t.Errorf("LoadTLS with a missing CA file: %v, want an error naming cluster.tls_ca_file", err)
	}
	manage, port := freePort(t), freePort(t)
	m, err := Join(Config{Name: "t", Host: "127.0.0.1", Port: port, ManagePort: manage,
		Peers: []string{"127.0.0.1:" + strconv.Itoa(manage)}, AdvertiseURL: "http://127.0.0.1:1",
		Refresh: 100 * time.Millisecond, TLS: mtls, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Leave()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.WaitJoined(ctx); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)

	// handshake dials the actor-system port with cfg and reads: a
	// server that refused the client's certificate says so then (TLS 1.3).
	handshake := func(cfg *tls.Config) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(time.Second))
		_, err = c.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil // the connection stands: gRPC waits for the client's preface
		}
		return err
	}
	if err := handshake(mtls.Client); err != nil {
		t.Errorf("a member's certificate: %v, want the connection to stand", err)
	}
	noCert := mtls.Client.Clone()
	noCert.Certificates = nil
	if err := handshake(noCert); err == nil {
		t.Error("no client certificate: the connection stands, want it refused")
	}
	stranger, err := tls.LoadX509KeyPair(otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	foreign := mtls.Client.Clone()
	foreign.Certificates = []tls.Certificate{stranger}
	if err := handshake(foreign); err == nil {
		t.Error("a certificate another CA signed: the connection stands, want it refused")
	}
	plain, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	plain.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	plain.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(plain)
	plain.Close()
	if strings.Contains(string(b), "\x00\x00") && !strings.Contains(string(b), "\x15\x03") {
		t.Errorf("plain gRPC to a TLS port was answered: %q", b)
	}

	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(manage) + "/_health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"cluster_name":"t"`) || !strings.Contains(string(body), strconv.Itoa(port)) {
		t.Errorf("membership endpoint: %d %s", resp.StatusCode, body)
	}
	// Bound to cluster.host (loopback here), not every interface.
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil {
			continue
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ipn.IP.String(), strconv.Itoa(manage)), time.Second); err == nil {
			c.Close()
			t.Errorf("the membership port answers on %s, want it bound to 127.0.0.1 only", ipn.IP)
		}
	}
}

package netcut

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echo serves lines back on a loopback port until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through addr and reads it back; the error of
// whichever step failed.
func roundTrip(c net.Conn) error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

// A proxy forwards until Cut; then its connections end and new ones end
// at once; after Restore it forwards again.
func TestProxyCut(t *testing.T) {
	t.Parallel()
	p, err := Listen(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	open := dial()
	if err := roundTrip(open); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := roundTrip(open); err == nil {
		t.Fatal("a connection open at the cut still forwards")
	}
	if err := roundTrip(dial()); err == nil {
		t.Fatal("a connection made during the cut forwards")
	}
	p.Restore()
	if err := roundTrip(dial()); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
	if p.Cuts() != 1 {
		t.Fatalf("Cuts() = %d, want 1", p.Cuts())
	}
}

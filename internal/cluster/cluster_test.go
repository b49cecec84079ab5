package cluster

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/messages"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A configuration that cannot work is refused whole, each problem
// naming its key.
func TestConfigRefused(t *testing.T) {
	_, err := Join(Config{Port: 70000, Peers: []string{"nohost"}, AdvertiseURL: "ftp://x"})
	if err == nil {
		t.Fatal("a bad configuration joined")
	}
	for _, want := range []string{"cluster.name", "cluster.host", "cluster.port 70000", "cluster.manage_port", `cluster.peers "nohost"`,
		"cluster.advertise_url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// One member alone (the other members of its peers down) is a cluster
// of one: it joins, owns every session, and leaves. (Two members in one
// process race on grpc's global logger under -race: the three-member
// test runs them as processes, in tests/.)
func TestSingleMember(t *testing.T) {
	manage := freePort(t)
	down := freePort(t) // a peer that never starts
	m, err := Join(Config{Name: "t", Host: "127.0.0.1", Port: freePort(t), ManagePort: manage,
		Peers:        []string{"127.0.0.1:" + strconv.Itoa(manage), "127.0.0.1:" + strconv.Itoa(down)},
		AdvertiseURL: "http://127.0.0.1:1", Refresh: 100 * time.Millisecond, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Leave()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.WaitJoined(ctx); err != nil {
		t.Fatal(err)
	}
	if n := m.Stats().Members; n != 1 {
		t.Fatalf("%d members, want 1", n)
	}
	for range 50 {
		s := messages.NewID[messages.SessionID](time.Now())
		if owner, local, ok := m.Owner(s); !ok || !local || owner != m.Address() {
			t.Fatalf("session %s: owner %q local %v ok %v; want this member (%s)", s, owner, local, ok, m.Address())
		}
	}
}

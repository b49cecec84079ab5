package cluster

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
)

// healthNode is what a member's membership endpoint answers: the node
// protoactor's automanaged provider reads, and the member ids this
// member has blocked.
type healthNode struct {
	*automanaged.NodeModel
	Blocked []string `json:"blocked,omitempty"`
}

// blocked returns the member ids inc's cluster has blocked.
func (inc *incarnation) blocked() []string {
	if inc.c.Remote == nil { // not started
		return nil
	}
	return inc.c.GetBlockedMembers().ToSlice()
}

// watchBlocked asks the peers each Refresh whether they have blocked
// this member's id, and rejoins under a new id when one has.
//
// protoactor blocks for good the id of every member that leaves its
// topology: a member that missed one membership poll (stalled longer
// than the poll's 2 s timeout: a paused VM, a machine starved of CPU)
// is left out of that peer's topology while it lives, though it answers
// every poll after. The two then place sessions over different
// members: each runs some sessions the other believes are its own
// (fenced by the store's compare-and-swap), and a request the one
// forwards to the other may be answered 503 "another member owns this
// session" until either restarts. A member that sees its id blocked by
// a peer that answers starts a new incarnation on the same ports, which
// every peer takes as a new member.
func (m *Member) watchBlocked() {
	defer m.wg.Done()
	client := &http.Client{Timeout: 2 * time.Second}
	t := time.NewTicker(m.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		inc := m.inc.Load()
		by := m.blockedBy(client, inc.sys.ID)
		if by == "" {
			continue
		}
		m.cfg.Log.Warn().Str("member", m.self).Str("id", inc.sys.ID).Str("peer", by).
			Msg("cluster: a peer has left this member out of its topology for good; rejoining under a new id")
		m.rejoin(inc)
	}
}

// blockedBy returns the first peer (its membership address) whose
// membership endpoint lists id as blocked, "" if none.
func (m *Member) blockedBy(client *http.Client, id string) string {
	for _, peer := range m.cfg.Peers {
		resp, err := client.Get("http://" + peer + "/_health")
		if err != nil {
			continue
		}
		var n struct {
			ID      string   `json:"id"`
			Blocked []string `json:"blocked"`
		}
		err = json.NewDecoder(resp.Body).Decode(&n)
		resp.Body.Close()
		if err == nil && n.ID != id && slices.Contains(n.Blocked, id) {
			return peer
		}
	}
	return ""
}

// rejoin replaces incarnation old by a new one on the same ports,
// trying again each Refresh until it starts or the member leaves.
// Meanwhile placement goes on over the last topology.
func (m *Member) rejoin(old *incarnation) {
	if old.started.Load() {
		old.c.Shutdown(true)
	}
	for {
		_, err := m.start()
		if err == nil {
			m.rejoins.Add(1)
			return
		}
		m.cfg.Log.Warn().Err(err).Msg("cluster: rejoin")
		select {
		case <-m.done:
			return
		case <-time.After(m.cfg.Refresh):
		}
	}
}

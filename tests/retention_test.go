package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/client"
)

// retentionDeleted reads ctxinf_retention_deleted_sessions_total from the
// server's /metrics.
func retentionDeleted(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "ctxinf_retention_deleted_sessions_total "); ok {
			return v
		}
	}
	t.Fatalf("/metrics has no ctxinf_retention_deleted_sessions_total:\n%s", b)
	return ""
}

// TestServeRetentionDeletesIdleSession: `ctxinf serve` with a retention
// of 8 seconds (retention.idle from the environment) and its job every
// second. A session whose turns, pin and title hold a marker goes idle,
// and the job deletes it: its id is not found, the metric counts it, and
// no file under the data dir holds a byte of the marker. A control
// session that keeps taking turns is kept, its marker found and its
// history readable; so is one idle as long with a retention of its own
// of 0 (kept forever).
func TestServeRetentionDeletesIdleSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "CTX_RETENTION_IDLE=8s", "CTX_RETENTION_INTERVAL=1s")
	ctx := context.Background()
	c := client.New(s.url)
	gone, active, forever := uniqueMarker("RET-GONE-"), uniqueMarker("RET-ACTIVE-"), uniqueMarker("RET-FOREVER-")
	sg, bg, err := c.CreateSession(ctx, "title "+gone)
	if err != nil {
		t.Fatal(err)
	}
	sf, bf, err := c.CreateSession(ctx, "title "+forever)
	if err != nil {
		t.Fatal(err)
	}
	// Both are kept forever while they are written and scanned: the
	// job, which runs every second, leaves the files alone meanwhile.
	zero := "0"
	for _, id := range []client.Session{sg, sf} {
		if r, err := c.SetRetention(ctx, id.ID, &zero); err != nil || r.Source != "session" || r.Expires != nil {
			t.Fatalf("SetRetention(0) = %+v, %v", r, err)
		}
	}
	for _, x := range []struct {
		b      client.Branch
		marker string
	}{{bg, gone}, {bf, forever}} {
		if _, err := c.Pin(ctx, x.b.ID, "pinned "+x.marker); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Send(ctx, x.b.ID, "a turn says "+x.marker); err != nil {
			t.Fatal(err)
		}
		settle(t, c, x.b.ID)
	}
	if got := filesHolding(t, dir, gone); len(got) == 0 {
		t.Fatal("before the job no file holds the marker: the scan cannot see it")
	}
	// Back to the server's retention (a retention set is no activity).
	r, err := c.SetRetention(ctx, sg.ID, nil)
	if err != nil || r.Idle != "8s" || r.Source != "default" || r.Own != nil || r.Expires == nil {
		t.Fatalf("SetRetention(gone, nil) = %+v, %v; want the server's 8s", r, err)
	}
	sa, ba, err := c.CreateSession(ctx, "title "+active)
	if err != nil {
		t.Fatal(err)
	}
	// The active session takes a turn every 200ms while the job runs;
	// the job's metric says when it has deleted a session (and finished
	// with it: journals removed, memory dropped).
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; retentionDeleted(t, s.url) != "1"; i++ {
		if _, err := c.Send(ctx, ba.ID, fmt.Sprintf("turn %d says %s", i, active)); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the retention job deleted nothing in 60s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The active session is kept forever from now on, and the server
	// stopped, so that the scans see files nothing changes.
	if _, err := c.SetRetention(ctx, sa.ID, &zero); err != nil {
		t.Fatal(err)
	}
	_, err = c.Retention(ctx, sg.ID)
	wantStatus(t, "GET the deleted session's retention", err, 404)
	_, _, err = c.History(ctx, bg.ID, [16]byte{}, 10)
	wantStatus(t, "history of the deleted session", err, 404)
	s.stop(t)
	if got := filesHolding(t, dir, gone); len(got) > 0 {
		t.Errorf("after the job deleted the session its marker is in %v", got)
	}
	for _, x := range []struct {
		sess   client.Session
		b      client.Branch
		marker string
	}{{sa, ba, active}, {sf, bf, forever}} {
		if got := filesHolding(t, dir, x.marker); len(got) == 0 {
			t.Errorf("the kept session's marker %s is in no file", x.marker)
		}
	}
	s = startServe(t, dir, "CTX_RETENTION_IDLE=8s", "CTX_RETENTION_INTERVAL=1s")
	defer s.stop(t)
	c = client.New(s.url)
	for _, x := range []struct {
		sess   client.Session
		b      client.Branch
		marker string
	}{{sa, ba, active}, {sf, bf, forever}} {
		h, _, err := c.History(ctx, x.b.ID, [16]byte{}, 4)
		if err != nil || len(h) == 0 || !strings.Contains(h[len(h)-1].Message.RenderedText, x.marker) {
			t.Errorf("history of kept session %s: %d entries, %v", x.sess.ID, len(h), err)
		}
	}
}

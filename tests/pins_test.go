package tests

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/client"
)

// Pins through the real binary: the limit from the environment refuses
// a pin with a 400 naming it; unpins and edits by id survive a SIGKILL;
// a fork keeps the pins in effect at its fork point.
func TestServePins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServe(t, dir, "CTX_CONTEXT_MAX_PINS=2")
	ctx := context.Background()
	c := client.New(s.url)
	_, b, err := c.CreateSession(ctx, "pins")
	if err != nil {
		t.Fatal(err)
	}
	for _, fact := range []string{"answer in French", "use tabs"} {
		if _, err := c.Pin(ctx, b.ID, fact); err != nil {
			t.Fatal(err)
		}
	}
	var ce *client.Error
	if _, err := c.Pin(ctx, b.ID, "a third"); !errors.As(err, &ce) || ce.Status != 400 || !strings.Contains(ce.Message, "limit 2 (context.max_pins)") {
		t.Fatalf("a pin over context.max_pins: %v", err)
	}
	first, err := c.Send(ctx, b.ID, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, b.ID, "again"); err != nil {
		t.Fatal(err)
	}
	if err := c.Unpin(ctx, b.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EditPin(ctx, b.ID, 2, "use spaces"); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s = startServe(t, dir, "CTX_CONTEXT_MAX_PINS=2")
	c = client.New(s.url)
	pins, err := c.Pins(ctx, b.ID)
	if err != nil || len(pins) != 1 || pins[0].ID != 2 || pins[0].Fact != "use spaces" {
		t.Fatalf("pins after a SIGKILL: %+v, %v", pins, err)
	}
	if p, err := c.Pin(ctx, b.ID, "deploy to eu-west-1"); err != nil || p.ID != 3 {
		t.Fatalf("a pin after a restart: %+v, %v", p, err)
	}
	// The fork after turn 1 has the pins as they were then (before turn
	// 2), not as they are now.
	fork, err := c.Fork(ctx, b.ID, first.Turn, "at turn 1")
	if err != nil {
		t.Fatal(err)
	}
	pins, err = c.Pins(ctx, fork.ID)
	if err != nil || len(pins) != 2 || pins[0].Fact != "answer in French" || pins[1].Fact != "use tabs" {
		t.Fatalf("the fork's pins: %+v, %v", pins, err)
	}
	if err := c.Unpin(ctx, fork.ID, 1); err != nil {
		t.Fatal(err)
	}
	s.stop(t)
}

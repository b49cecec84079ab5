package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/client"
	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/providers/fake"
)

// A streamed turn's delta and done events carry the text's byte counts
// (text_displayed, text_durable) beside the journal's: here the journal
// fsyncs nothing before the stream ends, so the text stays buffered
// until done, where it is all durable; the result and a waited turn's
// answer carry the final counts.
func TestStreamCarriesTextCounters(t *testing.T) {
	ctx := context.Background()
	const reply = "every word streams before it is durable"
	url := serveWith(t, nil, func(cfg *actors.Config) {
		cfg.Journal = persistence.JournalPolicy{FlushInterval: time.Hour, FlushBytes: 1, FsyncInterval: time.Hour}
		cfg.Provider = fake.New(fake.Step{Reply: reply}, fake.Step{Reply: reply})
	})
	c := client.New(url)
	_, b, err := c.CreateSession(ctx, "text counters")
	if err != nil {
		t.Fatal(err)
	}
	var shown uint64
	var deltas int
	var done client.Event
	res, err := c.Stream(ctx, b.ID, "hello", func(e client.Event) error {
		switch e.Type {
		case "delta":
			deltas++
			shown += uint64(len(e.Text))
			if e.TextDisplayed != shown || e.TextDurable != 0 || e.Displayed <= e.TextDisplayed {
				t.Errorf("delta %q: text durable/displayed %d/%d, journal %d/%d; want text 0/%d",
					e.Text, e.TextDurable, e.TextDisplayed, e.Durable, e.Displayed, shown)
			}
		case "done":
			done = e
		}
		return nil
	})
	if err != nil || res.Reply != reply || deltas < 5 {
		t.Fatalf("stream: %+v (%d deltas), %v", res, deltas, err)
	}
	want := uint64(len(reply))
	if done.TextDisplayed != want || done.TextDurable != want || done.Durable != done.Displayed || done.Displayed <= want {
		t.Fatalf("done event: text durable/displayed %d/%d, journal %d/%d; want text %d/%d",
			done.TextDurable, done.TextDisplayed, done.Durable, done.Displayed, want, want)
	}
	if res.TextDisplayed != want || res.TextDurable != want {
		t.Fatalf("stream result: text durable/displayed %d/%d, want %d/%d", res.TextDurable, res.TextDisplayed, want, want)
	}
	sent, err := c.Send(ctx, b.ID, "again")
	if err != nil || sent.Reply != reply || sent.TextDisplayed != want || sent.TextDurable != want {
		t.Fatalf("send: %+v, %v; want text %d/%d", sent, err, want, want)
	}
}

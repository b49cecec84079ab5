package openai_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/fakeapi"
	"github.com/contextinfinity/ctxinf/providers"
	"github.com/contextinfinity/ctxinf/providers/openai"
)

// BenchmarkStream streams a text answer of n deltas from a loopback
// server through the SDK and the normalizer, for each API.
func BenchmarkStream(b *testing.B) {
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		for _, n := range []int{100, 1000} {
			b.Run(fmt.Sprintf("api=%s/deltas=%d", api, n), func(b *testing.B) {
				reply := fakeapi.ChatTextN(n, "word ")
				if api == openai.APIResponses {
					reply = fakeapi.ResponsesTextN(n, "word ")
				}
				p := provider(newServer(b, reply), api)
				req := basicRequest()
				emit := func(providers.Event) error { return nil }
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Stream(context.Background(), req, emit); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
			})
		}
	}
}

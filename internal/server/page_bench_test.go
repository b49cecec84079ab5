package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/contextinfinity/ctxinf/messages"
	"github.com/contextinfinity/ctxinf/persistence"
)

// BenchmarkListSessions times GET /v1/sessions (no parameters: the first
// page) on a store of sessions=N sessions, half of them another tenant's.
func BenchmarkListSessions(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprint("sessions=", n), func(b *testing.B) {
			ts := newTenantServer(&testing.T{})
			ctx := context.Background()
			now := time.Now()
			for i := 0; i < n; i += 5000 {
				tx := &persistence.Tx{}
				for j := i; j < min(n, i+5000); j++ {
					tenant := "acme"
					if j%2 == 1 {
						tenant = "beta"
					}
					tx.Sessions = append(tx.Sessions, persistence.SessionRow{ID: messages.NewID[messages.SessionID](now), Title: fmt.Sprint("session ", j),
						ActiveBranch: messages.NewID[messages.BranchID](now), Created: now, Tenant: tenant})
				}
				if _, err := ts.rt.DB().Commit(ctx, tx); err != nil {
					b.Fatal(err)
				}
			}
			var bytes int64
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest("GET", ts.URL+"/v1/sessions", nil)
				req.Header.Set("Authorization", "Bearer "+tokAcme)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				m, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				bytes = m
			}
			b.ReportMetric(float64(bytes), "bytes/response")
		})
	}
}

package bench

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/contextinfinity/ctxinf/persistence"
)

// The machine's own scheduling, timed alongside the server's figures:
// a turn crosses a dozen goroutines on several threads (the HTTP
// server, the branch and step actors, the committer, Badger's writer,
// the upstream), and where a parked thread takes long to wake, so does
// every such hop.

// handoffLatencies times n one-way handoffs between two goroutines
// locked to threads of their own, each the half of a round trip; before
// each round trip both threads park (pause), as a server's threads do
// between events. On bare metal a handoff costs a few microseconds.
func handoffLatencies(n int, pause time.Duration) []time.Duration {
	ping, pong := make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for range ping {
			pong <- struct{}{}
		}
	}()
	defer close(ping)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lat := make([]time.Duration, 0, n)
	for range n {
		time.Sleep(pause)
		t := time.Now()
		ping <- struct{}{}
		<-pong
		lat = append(lat, time.Since(t)/2)
	}
	return lat
}

// sleepLateness times how late n sleeps of d wake: the host's scheduling
// stalls, which no work in the process causes, and which put a floor
// under any p99 measured here.
func sleepLateness(n int, d time.Duration) []time.Duration {
	lat := make([]time.Duration, 0, n)
	for range n {
		lat = append(lat, sleepLate(d))
	}
	return lat
}

// sleepLate sleeps for d and returns how late it woke.
func sleepLate(d time.Duration) time.Duration {
	t := time.Now()
	time.Sleep(d)
	return max(time.Since(t)-d, 0)
}

// floorProxy serves the least a proxy that makes its exchanges durable
// can do, as a baseline for the proxy's overhead: each POST is sent on
// to upstream+path as it came, with net/http alone (no SDK, no parsing,
// no context), the reply streamed back as it arrives, and request and
// reply written into a file of fixed size and fdatasynced (as the
// store's redo log is) before the stream's last read ("[DONE]") goes
// out.
func floorProxy(upstream, dir string) (url string, stop func(), err error) {
	const logSize = 16 << 20 // wraps; a record is a few KB
	log, err := os.OpenFile(filepath.Join(dir, "floor.log"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return "", nil, err
	}
	if err := fillZeros(log, logSize); err != nil {
		log.Close()
		return "", nil, err
	}
	var (
		mu  sync.Mutex // the log's offset; one record at a time
		off int64
	)
	record := func(rec []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if off+int64(len(rec)) > logSize {
			off = 0
		}
		if _, err := log.WriteAt(rec, off); err != nil {
			return err
		}
		off += int64(len(rec))
		return persistence.Fdatasync(log)
	}
	hc := &http.Client{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, upstream+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		rec := body
		buf := make([]byte, 32<<10)
		for {
			n, rerr := res.Body.Read(buf)
			rec = append(rec, buf[:n]...)
			if n > 0 && !bytes.Contains(buf[:n], []byte("[DONE]")) {
				_, _ = w.Write(buf[:n])
				fl.Flush()
				n = 0
			}
			if rerr != nil || n > 0 {
				if err := record(rec); err != nil {
					return // the stream ends without its last events
				}
				_, _ = w.Write(buf[:n])
				if rerr == nil {
					_, _ = io.Copy(w, res.Body)
				}
				return
			}
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() {
		_ = srv.Close()
		log.Close()
	}, nil
}

// countStalls counts, until stop is called, the sleeps of 1 ms on a
// goroutine of its own that woke more than late after their time: the
// host's stalls while a phase runs (a process with nothing else to do
// sees them too). stop returns the count.
func countStalls(late time.Duration) (stop func() int) {
	done, n := make(chan struct{}), make(chan int, 1)
	go func() {
		count := 0
		for {
			select {
			case <-done:
				n <- count
				return
			default:
			}
			if sleepLate(time.Millisecond) > late {
				count++
			}
		}
	}()
	return func() int {
		close(done)
		return <-n
	}
}

package main

import (
	"runtime"
	"time"
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
		t := time.Now()
		time.Sleep(d)
		lat = append(lat, max(time.Since(t)-d, 0))
	}
	return lat
}

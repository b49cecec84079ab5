package actors

import "testing"

// A branch actor is asked directly while it lives (Runtime.pid caches
// it); once it has stopped, or was killed and restarted, the next request
// reaches the actor that replaced it, with the state it rebuilt.
func TestAskFindsTheLiveActor(t *testing.T) {
	t.Parallel()
	r, b := branchOn(t, testConfig(t, t.TempDir(), newEvents()))
	runTurn(t, r, b, "hello")
	first, err := r.pid(bg, b)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := r.pid(bg, b); again != first {
		t.Fatalf("a live branch's actor: %v, then %v", first, again)
	}
	for i := range 20 {
		if i%2 == 0 {
			err = r.Stop(bg, b)
		} else {
			err = r.kill(bg, b)
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := r.Inspect(bg, b)
		if err != nil || info.TurnSeq != 1 {
			t.Fatalf("after stop or kill %d: Inspect = %+v, %v; want the one turn", i, info, err)
		}
	}
	if pid, _ := r.pid(bg, b); pid == first {
		select {
		case <-r.goneChan(first):
			t.Fatal("a stopped actor's PID is still handed out")
		default:
		}
	}
}

// BenchmarkAsk is one request to a live branch actor and its answer.
func BenchmarkAsk(b *testing.B) {
	r, br := branchOn(b, testConfig(b, b.TempDir(), newEvents()))
	for b.Loop() {
		if _, err := r.Inspect(bg, br); err != nil {
			b.Fatal(err)
		}
	}
}

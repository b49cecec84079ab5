package actors

import "testing"

// A branch actor is asked directly while it lives (Runtime.pid caches
// it); once it has stopped, or was killed and restarted, the next request
// reaches the actor that replaced it, with the state it rebuilt.
func TestAskFindsTheLiveActor(t *testing.T) {
	r := openRuntime(t, testConfig(t, t.TempDir(), newEvents()))
	defer r.Close()
	_, b, err := r.CreateSession(bg, "ask")
	if err != nil {
		t.Fatal(err)
	}
	runTurn(t, r, b.ID, "hello")
	first, err := r.pid(bg, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := r.pid(bg, b.ID); again != first {
		t.Fatalf("a live branch's actor: %v, then %v", first, again)
	}
	for i := range 20 {
		if i%2 == 0 {
			err = r.Stop(bg, b.ID)
		} else {
			err = r.Kill(bg, b.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := r.Inspect(bg, b.ID)
		if err != nil || info.TurnSeq != 1 {
			t.Fatalf("after stop or kill %d: Inspect = %+v, %v; want the one turn", i, info, err)
		}
	}
	if pid, _ := r.pid(bg, b.ID); pid == first {
		select {
		case <-r.goneChan(first):
			t.Fatal("a stopped actor's PID is still handed out")
		default:
		}
	}
}

// BenchmarkAsk is one request to a live branch actor and its answer.
func BenchmarkAsk(b *testing.B) {
	r := openRuntime(b, testConfig(b, b.TempDir(), newEvents()))
	defer r.Close()
	_, br, err := r.CreateSession(bg, "ask")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := r.Inspect(bg, br.ID); err != nil {
			b.Fatal(err)
		}
	}
}

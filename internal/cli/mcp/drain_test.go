package mcp

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/synctest"
)

// The end of stdin waits for the response of every request read before
// it; notifications, the server's own requests and responses of other
// ids do not count, and a response may come in pieces.
func TestDrainHoldsStdinEndUntilAnswered(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		in := `{"jsonrpc":"2.0","id":1,"method":"initialize"}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
			`[{"jsonrpc":"2.0","id": "two","method":"tools/list"}]` + "\n"
		var out bytes.Buffer
		d := newDrain(strings.NewReader(in), &out)
		ended := make(chan error, 1)
		var read []byte
		go func() {
			var err error
			read, err = io.ReadAll(d)
			ended <- err
		}()
		stillOpen := func(after string) {
			t.Helper()
			synctest.Wait()
			select {
			case <-ended:
				t.Fatalf("stdin ended %s", after)
			default:
			}
		}
		stillOpen("before any response")
		for _, w := range []string{
			`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n",
			`{"jsonrpc":"2.0","id":"two","method":"ping"}` + "\n", // the server's request, not an answer
			`{"jsonrpc":"2.0","id":7,"result":{}}` + "\n",
		} {
			if _, err := d.Write([]byte(w)); err != nil {
				t.Fatal(err)
			}
			stillOpen("with request \"two\" unanswered, after " + w)
		}
		for _, piece := range []string{`{"jsonrpc":"2.0","id":"two",`, `"result":{"tools":[]}}` + "\n"} {
			if _, err := d.Write([]byte(piece)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		select {
		case err := <-ended:
			if err != nil || string(read) != in {
				t.Fatalf("read %q, %v; want the input whole, then its end", read, err)
			}
		default:
			t.Fatal("stdin did not end once every request was answered")
		}
		if !strings.HasSuffix(out.String(), `"result":{"tools":[]}}`+"\n") {
			t.Errorf("stdout = %q, want every write passed through", out.String())
		}
	})
}

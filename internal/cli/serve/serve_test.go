package serve

import (
	"reflect"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/server"
)

// `ctxinf serve` with config.yaml (and no tokens in the environment)
// serves with the options a server built from config.Default() has, as
// the tests and benchmarks build theirs: the server takes no defaults of
// its own, so config.yaml and Default are its one source.
func TestServeOptionsAreConfigYAML(t *testing.T) {
	t.Parallel()
	c, err := config.Load("../../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := serverOptions(c.Server, c.Server.Addr, nil, nil)
	want := server.OptionsOf(config.Default().Server)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("serverOptions(config.yaml) = %+v,\nwant server.OptionsOf(config.Default().Server) = %+v", got, want)
	}
	if _, err := server.New(nil, got); err != nil {
		t.Errorf("server.New(config.yaml's options): %v", err)
	}
}

package wiring

import (
	"maps"
	"testing"

	"github.com/rs/zerolog"

	"github.com/contextinfinity/ctxinf/internal/config"
)

// With librarian.model "", the librarian summarizes with the small model
// of the default model's provider when that model is the provider's own
// API with its key set; otherwise, and with "deterministic", the
// deterministic summarizer does.
func TestLibrarianPicksTheProvidersSmallModel(t *testing.T) {
	t.Parallel()
	keys := map[string]string{"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test"}
	withKeys := func(name string) string { return keys[name] }
	noKeys := func(string) string { return "" }
	for _, tc := range []struct {
		name   string
		edit   func(c *config.Config)
		getenv func(string) string
		want   string // the librarian's model id; "": the deterministic summarizer
	}{
		{"openai with its key", func(c *config.Config) {}, withKeys, "gpt-5.4-nano"},
		{"anthropic with its key", func(c *config.Config) { c.DefaultModel = "claude" }, withKeys, "claude-haiku-4-5"},
		{"no key", func(c *config.Config) {}, noKeys, ""},
		{"local default", func(c *config.Config) { c.DefaultModel = "local" }, withKeys, ""},
		{"a compatible server", func(c *config.Config) {
			m := c.Models["gpt"]
			m.BaseURL = "http://127.0.0.1:11434/v1"
			c.Models["gpt"] = m
		}, withKeys, ""},
		{"deterministic", func(c *config.Config) { c.Librarian.Model = config.LibrarianDeterministic }, withKeys, ""},
		{"no small model", func(c *config.Config) { c.Librarian.OpenAIModel = "" }, withKeys, ""},
		{"a model named", func(c *config.Config) { c.Librarian.Model = "claude" }, withKeys, "claude-sonnet-5-5"},
		{"another small model", func(c *config.Config) { c.Librarian.OpenAIModel = "gpt-5.4-mini" }, withKeys, "gpt-5.4-mini"},
	} {
		c := config.Default()
		c.Models = maps.Clone(c.Models)
		tc.edit(&c)
		def, models, unavailable := Models(c, Env{Getenv: tc.getenv})
		lib, ok := librarianModel(c, def, models, unavailable, zerolog.Nop())
		if got := lib.Model; ok != (tc.want != "") || got != tc.want {
			t.Errorf("%s: librarian model %q (%v), want %q", tc.name, got, ok, tc.want)
		}
	}
}

package wiring

import (
	"testing"

	"github.com/contextinfinity/ctxinf/internal/config"
)

// memory.tools_models opts models entries in to the memory tools: the
// runtime's own setting is the default model's (local's when it falls
// back to the local provider), and an entry that differs from it says
// so itself.
func TestRuntimeMemoryToolsPerModel(t *testing.T) {
	t.Parallel()
	on, off := "true", "false"
	for _, tc := range []struct {
		name    string
		def     string
		all     bool
		opted   []string
		runtime bool
		models  map[string]string // name: true, false, or "" (unset: the runtime's)
	}{
		{"none", "local", false, nil, false, map[string]string{"gpt": "", "claude": "", "local": ""}},
		{"all", "gpt", true, nil, true, map[string]string{"gpt": on, "claude": on, "local": on}},
		{"one, not the default", "local", false, []string{"claude"}, false, map[string]string{"gpt": "", "claude": on, "local": ""}},
		{"the default", "gpt", false, []string{"gpt"}, true, map[string]string{"gpt": on, "claude": off, "local": off}},
		{"local, the default's fallback", "", false, []string{"local"}, true, map[string]string{"gpt": off, "claude": off, "local": on}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := config.Default()
			c.DataDir = t.TempDir()
			c.DefaultModel, c.Memory.Tools, c.Memory.ToolsModels = tc.def, tc.all, tc.opted
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			cfg, err := Runtime(c, Env{Getenv: func(string) string { return "key" }})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MemoryTools != tc.runtime {
				t.Errorf("MemoryTools = %v, want %v", cfg.MemoryTools, tc.runtime)
			}
			for name, want := range tc.models {
				m, ok := cfg.Models[name]
				if !ok {
					t.Fatalf("no model %s", name)
				}
				got := ""
				if m.MemoryTools != nil {
					got = map[bool]string{true: on, false: off}[*m.MemoryTools]
				}
				if got != want {
					t.Errorf("Models[%s].MemoryTools = %q, want %q", name, got, want)
				}
			}
		})
	}
}

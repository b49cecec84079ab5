package config

import (
	"reflect"
	"strings"
	"testing"
)

// memory.tools_models is read from the file (a list of models entries)
// and from CTX_MEMORY_TOOLS_MODELS ("a,b"), and defaults to none.
func TestLoadMemoryToolsModels(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{"none", "", nil, []string{}},
		{"file", "memory:\n  tools_models: [claude, local]\n", nil, []string{"claude", "local"}},
		{"env", "", map[string]string{"CTX_MEMORY_TOOLS_MODELS": " claude, local ,"}, []string{"claude", "local"}},
		{"env over file", "memory:\n  tools_models: [gpt]\n", map[string]string{"CTX_MEMORY_TOOLS_MODELS": "local"}, []string{"local"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			t.Chdir(t.TempDir())
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			path := ""
			if tc.file != "" {
				path = writeFile(t, tc.file)
			}
			c, err := Load(path)
			if err != nil {
				t.Fatalf("Load = %v", err)
			}
			if !reflect.DeepEqual(c.Memory.ToolsModels, tc.want) {
				t.Errorf("memory.tools_models = %q, want %q", c.Memory.ToolsModels, tc.want)
			}
			for _, name := range []string{"gpt", "claude", "local"} {
				if on, want := c.MemoryToolsOn(name), strings.Contains(","+strings.Join(tc.want, ",")+",", ","+name+","); on != want {
					t.Errorf("MemoryToolsOn(%q) = %v, want %v", name, on, want)
				}
			}
		})
	}
}

// A memory.tools_models naming no models entry, naming one twice, or
// memory tools where tools.mode runs none of the runtime's tools, are
// refused, naming the key and what it wants.
func TestMemoryToolsRejected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*Config)
		want   []string
	}{
		{"unknown model", func(c *Config) { c.Memory.ToolsModels = []string{"claude", "gtp"} },
			[]string{`memory.tools_models[1]: "gtp" names no models entry (claude, gpt, local)`}},
		{"twice", func(c *Config) { c.Memory.ToolsModels = []string{"local", "local"} },
			[]string{`memory.tools_models[1]: "local" is memory.tools_models[0] already`}},
		{"parse_only", func(c *Config) { c.Memory.Tools, c.Tools.Mode = true, ToolsParseOnly },
			[]string{`memory.tools: true, but tools.mode parse_only runs no tool of the runtime's`}},
		{"parse_only per model", func(c *Config) { c.Memory.ToolsModels, c.Tools.Mode = []string{"gpt"}, ToolsParseOnly },
			[]string{`memory.tools_models: ["gpt"], but tools.mode parse_only runs no tool of the runtime's`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.modify(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to say %q", err, w)
				}
			}
		})
	}
	c := Default()
	c.Memory.ToolsModels, c.Tools.Mode = []string{"claude", "local"}, ToolsEnabled
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() of models entries opted in = %v, want nil", err)
	}
}

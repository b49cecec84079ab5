package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name   string
		file   string // YAML content; "" means no file
		env    map[string]string
		modify func(*Config) // applied to Default() to get the expected Config
	}{
		{
			name:   "defaults only",
			modify: func(*Config) {},
		},
		{
			name:   "empty file",
			file:   "# nothing set\n",
			modify: func(*Config) {},
		},
		{
			name: "file overrides defaults",
			file: `
data_dir: /var/lib/ctxinf
log:
  level: debug
  format: json
store:
  durability: relaxed
  max_payload_bytes: 1048576
  group_commit_max: 64
  value_threshold_bytes: 2048
  memtable_bytes: 33554432
  block_cache_bytes: 0
  value_log_file_bytes: 134217728
  turn_cache_entries: 1000
  blob_cache_bytes: 4096
  gc_interval: 1h30m
  gc_discard_ratio: 0.7
  compression: none
  min_free_bytes: 1073741824
`,
			modify: func(c *Config) {
				c.DataDir = "/var/lib/ctxinf"
				c.Log = LogConfig{Level: LevelDebug, Format: FormatJSON}
				c.Store = StoreConfig{
					Durability:          DurabilityRelaxed,
					MaxPayloadBytes:     MiB,
					GroupCommitMax:      64,
					ValueThresholdBytes: 2 * KiB,
					MemTableBytes:       32 * MiB,
					BlockCacheBytes:     0,
					ValueLogFileBytes:   128 * MiB,
					NodeCacheEntries:    1000,
					BlobCacheBytes:      4096,
					GCInterval:          90 * time.Minute,
					GCDiscardRatio:      0.7,
					Compression:         CompressionNone,
					RedoLogBytes:        64 * MiB,
					MinFreeBytes:        GiB,

					EncryptionKeyEnv:      "CTX_STORE_KEY",
					EncryptionKeyRotation: 240 * time.Hour,

					Backend:          BackendBadger,
					PostgresURLEnv:   "CTX_STORE_POSTGRES_URL",
					PostgresMaxConns: 16,
				}
			},
		},
		{
			name: "file sets some keys, the rest keep defaults",
			file: "store:\n  group_commit_max: 8\n",
			modify: func(c *Config) {
				c.Store.GroupCommitMax = 8
			},
		},
		{
			name:   "empty section and key without value keep defaults",
			file:   "data_dir:\nlog:\nstore:\n  # all commented out\n",
			modify: func(*Config) {},
		},
		{
			name:   "bare zero disables gc",
			file:   "store:\n  gc_interval: 0\n",
			modify: func(c *Config) { c.Store.GCInterval = 0 },
		},
		{
			name:   "whole-number float for an integer",
			file:   "store:\n  max_payload_bytes: 1e6\n",
			modify: func(c *Config) { c.Store.MaxPayloadBytes = 1000000 },
		},
		{
			name: "env overrides defaults",
			env: map[string]string{
				"CTX_DATA_DIR":                "/tmp/ctx",
				"CTX_LOG_LEVEL":               "warn",
				"CTX_LOG_FORMAT":              "console",
				"CTX_STORE_DURABILITY":        "relaxed",
				"CTX_STORE_MAX_PAYLOAD_BYTES": "4096",
				"CTX_STORE_GROUP_COMMIT_MAX":  "1",
				"CTX_STORE_GC_INTERVAL":       "30s",
				"CTX_STORE_GC_DISCARD_RATIO":  "0.25",
				"CTX_STORE_COMPRESSION":       "none",
			},
			modify: func(c *Config) {
				c.DataDir = "/tmp/ctx"
				c.Log = LogConfig{Level: LevelWarn, Format: FormatConsole}
				c.Store.Durability = DurabilityRelaxed
				c.Store.MaxPayloadBytes = 4096
				c.Store.GroupCommitMax = 1
				c.Store.GCInterval = 30 * time.Second
				c.Store.GCDiscardRatio = 0.25
				c.Store.Compression = CompressionNone
			},
		},
		{
			// "" is a documented value of these keys (the frame port off,
			// the offline model); an empty variable sets it, over the file
			// too. Other keys keep ignoring an empty variable.
			name: "empty env sets a key whose empty value means something",
			file: "server:\n  frame_addr: 127.0.0.1:9999\n",
			env: map[string]string{
				"CTX_SERVER_FRAME_ADDR": "",
				"CTX_DEFAULT_MODEL":     "",
				"CTX_DATA_DIR":          "",
			},
			modify: func(c *Config) {
				c.Server.FrameAddr = ""
				c.DefaultModel = ""
			},
		},
		{
			name: "env overrides file",
			file: "data_dir: /from/file\nlog:\n  level: debug\nstore:\n  max_payload_bytes: 1024\n  gc_interval: 1m\n",
			env: map[string]string{
				"CTX_DATA_DIR":                "/from/env",
				"CTX_STORE_MAX_PAYLOAD_BYTES": "2048",
				"CTX_STORE_GC_INTERVAL":       "0",
			},
			modify: func(c *Config) {
				c.DataDir = "/from/env"
				c.Log.Level = LevelDebug // from the file, not overridden
				c.Store.MaxPayloadBytes = 2048
				c.Store.GCInterval = 0
			},
		},
		{
			name: "models added in the file, default overridden by env",
			file: "default_model: llama\nmodels:\n  llama:\n    provider: openai\n    model_id: llama3\n    context_limit: 8192\n    api_key_env: LLAMA_KEY\n    base_url: http://127.0.0.1:8080/v1\n",
			env:  map[string]string{"CTX_MODELS_GPT_MODEL_ID": "gpt-5", "CTX_MODELS_CLAUDE_CACHE": "false"},
			modify: func(c *Config) {
				c.DefaultModel = "llama"
				claude := Default().Models["claude"]
				claude.Cache = new(false)
				c.Models = map[string]ModelConfig{
					"gpt": {Provider: "openai", ModelID: "gpt-5", ContextLimit: 128000, APIKeyEnv: "OPENAI_API_KEY",
						BaseURL: "https://api.openai.com/v1", Truncation: "disabled", Cache: new(true)},
					"claude": claude,
					"local":  Default().Models["local"],
					"llama": {Provider: "openai", ModelID: "llama3", ContextLimit: 8192, APIKeyEnv: "LLAMA_KEY",
						BaseURL: "http://127.0.0.1:8080/v1"},
				}
			},
		},
		{
			name:   "empty env var is ignored",
			file:   "log:\n  level: error\n",
			env:    map[string]string{"CTX_LOG_LEVEL": ""},
			modify: func(c *Config) { c.Log.Level = LevelError },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			t.Chdir(t.TempDir()) // no ./config.yaml unless the test writes one
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}
			want := Default()
			tt.modify(&want)

			got, err := Load(path)
			if err != nil {
				t.Fatalf("Load(%q) error = %v, want nil", path, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Load(%q) = %+v, want %+v", path, got, want)
			}
		})
	}
}

func TestLoadDefaultPath(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	t.Chdir(dir)

	got, err := Load("")
	if err != nil || !reflect.DeepEqual(got, Default()) {
		t.Fatalf(`Load("") without %s = %+v, %v, want Default(), nil`, DefaultPath, got, err)
	}

	if err := os.WriteFile(filepath.Join(dir, DefaultPath), []byte("log:\n  level: trace\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Log.Level = LevelTrace
	got, err = Load("")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf(`Load("") with %s = %+v, %v, want %+v, nil`, DefaultPath, got, err, want)
	}
}

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name string
		file string
		env  map[string]string
		want []string // each must appear in the error; one error per entry
	}{
		{
			name: "unknown top-level key",
			file: "datadir: ./x\n",
			want: []string{`unknown key "datadir"`},
		},
		{
			name: "unknown nested key",
			file: "store:\n  max_payload: 10\n",
			want: []string{`unknown key "store.max_payload"`},
		},
		{
			name: "unknown section",
			file: "server:\n  port: 80\n",
			want: []string{`unknown key "server.port"`},
		},
		{
			name: "every unknown key at once",
			file: "logs: 1\nstore:\n  gc: 1m\n  compresion: none\n",
			want: []string{`unknown key "logs"`, `unknown key "store.compresion"`, `unknown key "store.gc"`},
		},
		{
			name: "unknown model field and unknown default model",
			file: "default_model: nope\nmodels:\n  gpt:\n    temperature: 1\n",
			want: []string{`unknown key "models.gpt.temperature"`},
		},
		{
			name: "bad model entries",
			file: "default_model: nope\nmodels:\n  x:\n    provider: mistral\n    context_limit: 10\n    api: chat\n",
			want: []string{`models.x.provider`, `models.x.context_limit`, `models.x.api: "chat": only an openai model`, `default_model: "nope" is not one of models`},
		},
		{
			name: "section given a scalar",
			file: "log: debug\n",
			want: []string{`log: must be a mapping of keys, got debug`},
		},
		{
			name: "key given a mapping",
			file: "data_dir:\n  path: x\n",
			want: []string{`unknown key "data_dir.path"`},
		},
		{
			name: "malformed yaml",
			file: "log:\n  level: [info\n",
			want: []string{"config "},
		},
		{
			name: "invalid value in file",
			file: "store:\n  max_payload_bytes: 0\n",
			want: []string{`store.max_payload_bytes: 0 is out of range [1, 1073741824]`},
		},
		{
			name: "invalid value in env",
			env:  map[string]string{"CTX_LOG_LEVEL": "verbose"},
			want: []string{`log.level: "verbose" is not one of trace|debug|info|warn|error`},
		},
		{
			name: "invalid values from file and env together",
			file: "store:\n  gc_discard_ratio: 1.5\n",
			env:  map[string]string{"CTX_STORE_DURABILITY": "async", "CTX_STORE_GROUP_COMMIT_MAX": "0"},
			want: []string{
				`store.durability: "async" is not one of sync|relaxed`,
				`store.group_commit_max: 0 is out of range [1, 65536]`,
				`store.gc_discard_ratio: 1.5 is out of range (0, 1)`,
			},
		},
		{
			name: "size with units in env",
			env:  map[string]string{"CTX_STORE_MAX_PAYLOAD_BYTES": "8MiB"},
			want: []string{`store.max_payload_bytes: "8MiB" is not a whole number`},
		},
		{
			name: "size too large for int64 in env",
			env:  map[string]string{"CTX_STORE_BLOCK_CACHE_BYTES": "99999999999999999999"},
			want: []string{`store.block_cache_bytes: "99999999999999999999" does not fit in a 64-bit integer`},
		},
		{
			name: "fractional integer in file",
			file: "store:\n  group_commit_max: 1.5\n",
			want: []string{`store.group_commit_max: 1.5 is not a whole number`},
		},
		{
			name: "boolean integer in file",
			file: "store:\n  group_commit_max: true\n",
			want: []string{`store.group_commit_max: true is not a number`},
		},
		{
			name: "duration without unit in file",
			file: "store:\n  gc_interval: 600\n",
			want: []string{`store.gc_interval: 600 has no unit`},
		},
		{
			name: "bad duration in env",
			env:  map[string]string{"CTX_STORE_GC_INTERVAL": "ten minutes"},
			want: []string{`store.gc_interval: "ten minutes" is not a duration`},
		},
		{
			name: "bad float in env",
			env:  map[string]string{"CTX_STORE_GC_DISCARD_RATIO": "half"},
			want: []string{`store.gc_discard_ratio: "half" is not a number`},
		},
		{
			name: "decode problems reported together",
			file: "store:\n  gc_interval: soon\n",
			env:  map[string]string{"CTX_STORE_MEMTABLE_BYTES": "big"},
			want: []string{`store.gc_interval: "soon" is not a duration`, `store.memtable_bytes: "big" is not a whole number`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			t.Chdir(t.TempDir())
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}

			got, err := Load(path)
			if err == nil {
				t.Fatalf("Load(%q) = %+v, nil, want an error containing %q", path, got, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load(%q) error = %v, want it to contain %q", path, err, w)
				}
			}
			if lines := strings.Count(err.Error(), "\n") + 1; lines != len(tt.want) {
				t.Errorf("Load(%q) error has %d lines, want %d:\n%v", path, lines, len(tt.want), err)
			}
			if !reflect.DeepEqual(got, Config{}) {
				t.Errorf("Load(%q) on error returned %+v, want the zero Config", path, got)
			}
		})
	}
}

func TestLoadMissingExplicitFile(t *testing.T) {
	clearEnv(t)
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Load(%q) error = %v, want an error naming the path", path, err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(%q) error = %v, want errors.Is(err, fs.ErrNotExist)", path, err)
	}
}

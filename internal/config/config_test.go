package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/viper"
)

// clearEnv blanks every CTX_* variable for the duration of the test; viper
// ignores empty environment variables.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, EnvPrefix+"_") {
			t.Setenv(name, "")
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v, want nil", err)
	}
}

// TestRepoConfigYAML checks that the config.yaml shipped at the repository
// root lists every key and loads to exactly Default().
func TestRepoConfigYAML(t *testing.T) {
	clearEnv(t)
	const path = "../../config.yaml"

	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%q) error = %v, want nil", path, err)
	}
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("Load(%q) = %+v, want Default() = %+v", path, got, want)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw := viper.New()
	raw.SetConfigType("yaml")
	if err := raw.ReadConfig(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	inFile := raw.AllKeys()
	sort.Strings(inFile)
	leaves, _ := flatten(Default())
	var known []string
	for k := range leaves {
		known = append(known, k)
	}
	sort.Strings(known)
	if !slices.Equal(inFile, known) {
		t.Errorf("keys in %s = %v, want every key %v", path, inFile, known)
	}
}

func TestFlattenKeys(t *testing.T) {
	leaves, sections := flatten(Default())
	for _, key := range []string{"data_dir", "log.level", "log.format", "store.durability", "store.gc_interval", "store.compression"} {
		if _, ok := leaves[key]; !ok {
			t.Errorf("flatten(Default()) leaves lack %q", key)
		}
	}
	if want := map[string]bool{"log": true, "store": true, "runtime": true, "stream": true, "local": true, "librarian": true,
		"models": true, "models.gpt": true, "models.claude": true, "models.local": true, "tools": true, "memory": true, "context": true, "retrieval": true, "server": true,
		"redaction": true, "retention": true, "cluster": true}; !reflect.DeepEqual(sections, want) {
		t.Errorf("flatten(Default()) sections = %v, want %v", sections, want)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBenchStoreQuickJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every store figure at a small scale")
	}
	var out, errOut bytes.Buffer
	dir := t.TempDir()
	if code := run([]string{"bench", "store", "--quick", "--json", "--dir", dir}, &out, &errOut); code != 0 {
		t.Fatalf("bench store exited %d: %s", code, errOut.String())
	}
	var got map[string]float64
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
	}
	want := []string{"fsync_10k_p50_us", "append_p50_us", "append_p99_us", "group_appends_per_s",
		"get_last64_p50_us", "get_last64_p99_us", "fork_p50_us", "depth_range_p50_us",
		"full_history_400_ms", "dedup_bytes_ratio", "bytes_per_1k_turn"}
	var keys []string
	for k, v := range got {
		keys = append(keys, k)
		if v <= 0 {
			t.Errorf("%s = %v, want a positive measurement", k, v)
		}
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("keys = %v, want exactly %v", keys, want)
	}
}

func TestBadConfigNamesTheKey(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("store:\n  max_payload_bytes: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"--config", cfg, "bench", "store"}, &out, &errOut); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "store.max_payload_bytes") {
		t.Fatalf("error %q does not name the key", errOut.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "frobnicate"`) {
		t.Fatalf("run(frobnicate) = %d, %q", code, errOut.String())
	}
}

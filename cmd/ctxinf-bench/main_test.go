package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/persistence"
	"github.com/contextinfinity/ctxinf/persistence/badgerdb"
)

func TestBenchStoreQuickJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every store figure at a small scale")
	}
	var out, errOut bytes.Buffer
	dir := t.TempDir()
	if code := run([]string{"store", "--quick", "--json", "--dir", dir}, nil, &out, &errOut); code != 0 {
		t.Fatalf("store exited %d: %s", code, errOut.String())
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

// store --encrypted measures stores encrypted at rest: none of them
// opens without a key.
func TestBenchStoreEncrypted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every store figure at a small scale")
	}
	var out, errOut bytes.Buffer
	dir := t.TempDir()
	if code := run([]string{"store", "--quick", "--encrypted", "--dir", dir}, nil, &out, &errOut); code != 0 {
		t.Fatalf("store exited %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "encryption at rest: AES-256") {
		t.Errorf("output does not say the stores were encrypted:\n%s", out.String())
	}
	stores, _ := filepath.Glob(filepath.Join(dir, "*", "KEYREGISTRY"))
	if len(stores) == 0 {
		t.Fatalf("no store left in %s", dir)
	}
	for _, kr := range stores {
		s, err := badgerdb.OpenBadger(badgerdb.TestOptions(filepath.Dir(kr)))
		if !errors.Is(err, persistence.ErrEncrypted) {
			if err == nil {
				s.Close()
			}
			t.Errorf("open %s without a key = %v, want persistence.ErrEncrypted", filepath.Dir(kr), err)
		}
	}
}

func TestBenchStreamJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"stream", "--json", "--branches", "2", "--turns", "1", "--deltas", "200", "--dir", t.TempDir()}
	if code := run(args, nil, &out, &errOut); code != 0 {
		t.Fatalf("stream exited %d: %s", code, errOut.String())
	}
	var f map[string]any
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatalf("output %s: %v", out.String(), err)
	}
	for _, k := range []string{"deltas_per_s", "journal_bytes_per_displayed_byte", "delta_latency_p99_us"} {
		if v, ok := f[k].(float64); !ok || !(v > 0) {
			t.Errorf("%s = %v in %s", k, v, out.String())
		}
	}
	if f["deltas"] != 400.0 {
		t.Errorf("deltas = %v, want 400", f["deltas"])
	}
}

func TestBenchContextJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"context", "--json", "--small", "30", "--large", "60", "--sample", "10", "--dir", t.TempDir()}
	if code := run(args, nil, &out, &errOut); code != 0 {
		t.Fatalf("context exited %d: %s", code, errOut.String())
	}
	var f map[string]float64
	if err := json.Unmarshal(out.Bytes(), &f); err != nil {
		t.Fatalf("output %s: %v", out.String(), err)
	}
	for _, k := range []string{"assembly_p50_us_1k", "assembly_p99_us_1k", "assembly_p50_us_100k", "assembly_p99_us_100k",
		"working_set_tokens_mean", "full_history_tokens", "token_saving_ratio"} {
		if v, ok := f[k]; !ok || !(v > 0) {
			t.Errorf("%s = %v in %s", k, v, out.String())
		}
	}
	if len(f) != 7 {
		t.Errorf("keys %v, want exactly the seven", f)
	}
}

// mcp at a small scale: every figure is measured, and positive.
func TestBenchMCPJSON(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	args := []string{"mcp", "--json", "--turns", "200", "--calls", "5", "--dir", t.TempDir()}
	if code := run(args, nil, &out, &errOut); code != 0 {
		t.Fatalf("mcp exited %d: %s", code, errOut.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
	}
	for _, k := range []string{"search_memory_p50_us", "search_memory_p99_us", "runtime_search_p50_us", "get_context_p50_us",
		"get_context_p99_us", "runtime_next_context_p50_us", "get_context_tokens"} {
		if v, ok := got[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive measurement", k, got[k])
		}
	}
	if got["turns"] != float64(200) || got["calls"] != float64(5) {
		t.Errorf("turns, calls = %v, %v; want 200, 5", got["turns"], got["calls"])
	}
}

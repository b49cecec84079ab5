package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// retention is read from the file and the environment (days as "30d",
// CTX_RETENTION_TENANTS as "name=30d,…"), and keeps sessions forever by
// default.
func TestLoadRetention(t *testing.T) {
	day := 24 * time.Hour
	tenants := "server:\n  tenants: [{name: acme, tokens_env: A}, {name: globex, tokens_env: G}]\n"
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       RetentionConfig
	}{
		{"default", "", nil, RetentionConfig{Idle: 0, Interval: time.Hour, Batch: 16, Tenants: []TenantRetention{}}},
		{"file", tenants + "retention:\n  idle: 30d\n  interval: 10m\n  batch: 4\n  tenants:\n    - {name: acme, idle: 7d}\n    - {name: default, idle: 0}\n", nil,
			RetentionConfig{Idle: 30 * day, Interval: 10 * time.Minute, Batch: 4, Tenants: []TenantRetention{{"acme", 7 * day}, {"default", 0}}}},
		{"env", tenants, map[string]string{"CTX_RETENTION_IDLE": "2s", "CTX_RETENTION_INTERVAL": "1s",
			"CTX_RETENTION_TENANTS": " acme=90d, globex=36h ,"},
			RetentionConfig{Idle: 2 * time.Second, Interval: time.Second, Batch: 16, Tenants: []TenantRetention{{"acme", 90 * day}, {"globex", 36 * time.Hour}}}},
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
			if !reflect.DeepEqual(c.Retention, tc.want) {
				t.Errorf("retention = %+v, want %+v", c.Retention, tc.want)
			}
		})
	}
}

// Bad retention settings are refused, naming the key and the range.
func TestRetentionRejected(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		env  map[string]string
		want []string
	}{
		{"idle too short", "retention:\n  idle: 10ms\n", nil, []string{"retention.idle: 10ms is out of range: 0 (keep forever) or [1s, 876000h0m0s]"}},
		{"idle too long", "retention:\n  idle: 40000d\n", nil, []string{`retention.idle: "40000d" is not a duration`}},
		{"negative", "retention:\n  idle: -1h\n", nil, []string{"retention.idle: -1h0m0s is out of range"}},
		{"interval", "retention:\n  interval: 0\n", nil, []string{"retention.interval: 0s is out of range [1s, 168h0m0s]"}},
		{"batch", "retention:\n  batch: 0\n", nil, []string{"retention.batch: 0 is out of range [1, 1000]"}},
		{"unknown tenant", "retention:\n  tenants: [{name: nobody, idle: 1d}]\n", nil,
			[]string{`retention.tenants[0].name: "nobody" is not a tenant: want "default" or a name of server.tenants`}},
		{"tenant twice", "retention:\n  tenants: [{name: default, idle: 1d}, {name: default, idle: 2d}]\n", nil,
			[]string{`retention.tenants[1].name: "default" is retention.tenants[0]'s too`}},
		{"tenant idle", "retention:\n  tenants: [{name: default, idle: 5ms}]\n", nil, []string{"retention.tenants[0].idle: 5ms is out of range"}},
		{"env form", "", map[string]string{"CTX_RETENTION_TENANTS": "acme"}, []string{`"acme": want name=duration`}},
		{"env days", "", map[string]string{"CTX_RETENTION_TENANTS": "default=xd"}, []string{`"xd" is not a whole number of days`}},
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
			_, err := Load(path)
			if err == nil {
				t.Fatal("Load = nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

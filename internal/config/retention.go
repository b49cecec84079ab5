package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// RetentionConfig is the retention job (docs/SECURITY.md, "Retention"):
// sessions idle longer than their retention are deleted for good.
type RetentionConfig struct {
	// Idle is the retention of a session without one of its own or of
	// its tenant: how long it may stay idle (no turn, fork or pin); 0
	// keeps it forever. Durations take days too: "30d".
	Idle time.Duration `mapstructure:"idle"`
	// Interval is how often `ctxinf serve` runs the job (it runs at start
	// too).
	Interval time.Duration `mapstructure:"interval"`
	// Batch is how many sessions one delete (one drop of the store, which
	// holds its writes) removes.
	Batch int `mapstructure:"batch"`
	// Tenants are tenants' retentions, overriding Idle for their
	// sessions. In the environment, CTX_RETENTION_TENANTS is
	// "name=30d,name2=0".
	Tenants []TenantRetention `mapstructure:"tenants"`
}

// TenantRetention is a tenant's retention (retention.tenants): Name is
// DefaultTenant or a name of server.tenants; Idle 0 keeps its sessions
// forever.
type TenantRetention struct {
	Name string        `mapstructure:"name"`
	Idle time.Duration `mapstructure:"idle"`
}

// Limits of retention.
const (
	MaxRetention = 100 * 365 * 24 * time.Hour
	MinRetention = time.Second
)

func defaultRetention() RetentionConfig {
	return RetentionConfig{Idle: 0, Interval: time.Hour, Batch: 16, Tenants: []TenantRetention{}}
}

func (r RetentionConfig) validate(p *problems, prefix string, tenants []TenantConfig) {
	idle := func(key string, d time.Duration) {
		if d != 0 && (d < MinRetention || d > MaxRetention) {
			p.addf("%s: %v is out of range: 0 (keep forever) or [%v, %v] (1s to 36500d)", key, d, MinRetention, MaxRetention)
		}
	}
	idle(prefix+"idle", r.Idle)
	p.durationIn(prefix+"interval", r.Interval, time.Second, 7*24*time.Hour)
	p.inRange(prefix+"batch", int64(r.Batch), 1, 1000)
	known := map[string]bool{DefaultTenant: true}
	for _, t := range tenants {
		known[t.Name] = true
	}
	seen := map[string]int{}
	for i, t := range r.Tenants {
		key := fmt.Sprintf("%stenants[%d]", prefix, i)
		switch j, dup := seen[t.Name]; {
		case !known[t.Name]:
			p.addf("%s.name: %q is not a tenant: want %q or a name of server.tenants", key, t.Name, DefaultTenant)
		case dup:
			p.addf("%s.name: %q is %stenants[%d]'s too", key, t.Name, prefix, j)
		default:
			seen[t.Name] = i
		}
		idle(key+".idle", t.Idle)
	}
}

var tenantRetentionsType = reflect.TypeFor[[]TenantRetention]()

// toTenantRetentions reads retention.tenants from the environment
// (CTX_RETENTION_TENANTS): "name=30d,name2=0", or nothing for none.
func toTenantRetentions(s string) (any, error) {
	out := []TenantRetention{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want name=duration (\"acme=30d\"), comma-separated", part)
		}
		d, err := ParseDays(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		out = append(out, TenantRetention{Name: strings.TrimSpace(name), Idle: d})
	}
	return out, nil
}

// ParseDays parses a Go duration ("36h", "90s"), a whole number of days
// ("30d") or "0".
func ParseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days < 0 || days > int64(MaxRetention/(24*time.Hour)) {
			return 0, fmt.Errorf("%q is not a whole number of days (0 to 36500)", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; %s", s, durationHint)
	}
	return d, nil
}

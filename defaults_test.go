package ctxinf

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/actors"
	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/internal/wiring"
)

// A library runtime opened with zero Options is configured as the binary
// configures one from config.yaml (in an environment without API keys),
// field by field: a field of actors.Config added to one and not the other
// fails here.
func TestZeroOptionsAreConfigYAML(t *testing.T) {
	dir := t.TempDir()
	want, _ := configYAML(t, dir)
	got, err := runtimeConfig(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		g, w := describe(gv.Field(i), 0), describe(wv.Field(i), 0)
		if g != w {
			t.Errorf("runtimeConfig(Options{}).%s = %s, want config.yaml's %s", name, g, w)
		}
	}
}

// A library caller's own actors.Config (Options.Config) left empty takes
// config.yaml's settings too: every field the filling sets has the value
// the binary's builder gives it from config.yaml. The retention job runs
// at retention.interval (the binary runs it in the command that serves),
// and the models, the store and what needs the environment are the
// caller's.
func TestEmptyConfigOptionIsConfigYAML(t *testing.T) {
	dir := t.TempDir()
	want, c := configYAML(t, dir)
	want.Retention = actors.RetentionPolicy{Interval: c.Retention.Interval, Batch: want.Retention.Batch}
	got, err := runtimeConfig(Options{DataDir: dir, Config: &actors.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	callers := map[string]bool{"DataDir": true, "Provider": true, "Model": true, "Store": true}
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	set := 0
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		if gv.Field(i).IsZero() || callers[name] {
			continue
		}
		set++
		if g, w := describe(gv.Field(i), 0), describe(wv.Field(i), 0); g != w {
			t.Errorf("runtimeConfig(Options{Config: &actors.Config{}}).%s = %s, want config.yaml's %s", name, g, w)
		}
	}
	if set == 0 {
		t.Error("an empty Options.Config was filled with nothing")
	}
}

// configYAML is the runtime's configuration the binary builds from
// config.yaml on dir, in an environment without API keys, and the
// configuration.
func configYAML(t *testing.T, dir string) (actors.Config, config.Config) {
	t.Helper()
	c, err := config.Load("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = dir
	cfg, err := wiring.Runtime(c, wiring.Env{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

// describe renders v for comparison: values by content through pointers
// and interfaces (to a depth), functions only as set or nil, long
// slices and maps by their length and first elements.
func describe(v reflect.Value, depth int) string {
	if !v.IsValid() {
		return "<invalid>"
	}
	if depth > 8 {
		return v.Type().String()
	}
	switch v.Kind() {
	case reflect.Func:
		if v.IsNil() {
			return "func(nil)"
		}
		return "func(set)"
	case reflect.Chan, reflect.UnsafePointer:
		return v.Type().String()
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "nil"
		}
		return v.Type().String() + "&" + describe(v.Elem(), depth+1)
	case reflect.Struct:
		var b strings.Builder
		b.WriteString(v.Type().String() + "{")
		for i := range v.NumField() {
			fmt.Fprintf(&b, "%s:%s ", v.Type().Field(i).Name, describe(v.Field(i), depth+1))
		}
		return b.String() + "}"
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return "nil"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "[%d:", v.Len())
		for i := range min(v.Len(), 8) {
			b.WriteString(describe(v.Index(i), depth+1) + " ")
		}
		return b.String() + "]"
	case reflect.Map:
		if v.IsNil() {
			return "nil"
		}
		if v.Len() > 32 {
			return fmt.Sprintf("map[%d]", v.Len())
		}
		var items []string
		for _, k := range v.MapKeys() {
			items = append(items, describe(k, depth+1)+":"+describe(v.MapIndex(k), depth+1))
		}
		sort.Strings(items)
		return "map[" + strings.Join(items, " ") + "]"
	case reflect.String:
		return fmt.Sprintf("%q", v.String())
	case reflect.Bool:
		return fmt.Sprint(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprint(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprint(v.Uint())
	case reflect.Float32, reflect.Float64:
		return fmt.Sprint(v.Float())
	}
	return v.Type().String()
}

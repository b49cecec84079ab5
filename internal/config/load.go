package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
)

// DefaultPath is the file Load reads when it is given no path and the file
// exists.
const DefaultPath = "config.yaml"

// EnvPrefix prefixes the environment variable of every key: the key
// store.max_payload_bytes is read from CTX_STORE_MAX_PAYLOAD_BYTES.
const EnvPrefix = "CTX"

// emptyMeaningful lists the keys with a non-empty default whose value ""
// is documented as meaning something: an empty environment variable sets
// them to "" (viper otherwise treats an empty variable as unset).
var emptyMeaningful = []string{
	"server.frame_addr", // "" turns the frame port off
	"default_model",     // "" is the offline local provider
}

// EnvName is the environment variable that sets key: CTX_ and the key in
// upper case with dots as underscores (server.frame_addr is
// CTX_SERVER_FRAME_ADDR).
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Load reads the configuration once at start-up: Default, overridden by the
// YAML file at path, overridden by CTX_* environment variables, then
// validated.
//
// An empty path means DefaultPath if it exists, otherwise defaults and
// environment only. A path that is named but cannot be read is an error
// naming it. Unknown keys in the file are errors (they are usually typos); a
// key present with no value (or a section with no keys) keeps its default.
// Durations are Go duration strings ("10m", "30s"); byte sizes are plain
// integers. All problems found are reported together; validation problems
// are exactly those of Validate.
func Load(path string) (Config, error) {
	leaves, sections := flatten(Default())

	v := viper.New()
	for key, def := range leaves {
		v.SetDefault(key, def)
	}
	// AutomaticEnv only consults keys viper knows of, which is why every key
	// has a default.
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	// viper ignores an empty environment variable; for the keys whose
	// documented value "" means something other than their default (off,
	// the offline model), an empty variable is that value.
	for _, key := range emptyMeaningful {
		if val, ok := os.LookupEnv(EnvName(key)); ok && val == "" {
			v.Set(key, "")
		}
	}

	data, path, found, err := readFile(path)
	if err != nil {
		return Config{}, err
	}
	if found {
		settings, err := fileSettings(path, data, leaves, sections)
		if err != nil {
			return Config{}, err
		}
		if err := v.MergeConfigMap(settings); err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
	}

	var c Config
	if err := v.UnmarshalExact(&c, viper.DecodeHook(decodeHook)); err != nil {
		return Config{}, decodeProblems(err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// readFile returns the contents of the configuration file, and whether there
// is one. When path is empty it tries DefaultPath and tolerates its absence.
func readFile(path string) (data []byte, name string, found bool, err error) {
	explicit := path != ""
	if !explicit {
		path = DefaultPath
	}
	data, err = os.ReadFile(path)
	switch {
	case err == nil:
		return data, path, true, nil
	case !explicit && errors.Is(err, fs.ErrNotExist):
		return nil, "", false, nil
	default:
		// *fs.PathError names the path.
		return nil, "", false, fmt.Errorf("config: %w", err)
	}
}

// fileSettings parses the YAML in data and returns its settings as a nested
// map, without null values, after checking every key in it against the known
// leaves and sections.
func fileSettings(path string, data []byte, leaves map[string]any, sections map[string]bool) (map[string]any, error) {
	f := viper.New()
	f.SetConfigType("yaml")
	if err := f.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	keys := f.AllKeys()
	sort.Strings(keys)
	var p problems
	for _, key := range keys {
		_, leaf := leaves[key]
		switch {
		case key == "store.encryption_key":
			p.addf("config %s: %s: an encryption key is never read from the configuration file; "+
				"put it in the environment variable store.encryption_key_env names (CTX_STORE_KEY by default) "+
				"or in the file store.encryption_key_file names, outside the data directory", path, key)
		case key == "store.postgres_url":
			p.addf("config %s: %s: the PostgreSQL URL (it may hold a password) is never read from the configuration file; "+
				"put it in the environment variable store.postgres_url_env names (CTX_STORE_POSTGRES_URL by default)", path, key)
		case leaf, isModelKey(key):
		case sections[key]:
			if val := f.Get(key); val != nil {
				p.addf("config %s: %s: must be a mapping of keys, got %v", path, key, val)
			}
		default:
			p.addf("config %s: unknown key %q", path, key)
		}
	}
	if err := errors.Join(p...); err != nil {
		return nil, err
	}
	// AllSettings leaves out keys whose value is null, so that they keep
	// their defaults instead of shadowing them.
	return f.AllSettings(), nil
}

// modelFields are the keys of one models.<name> entry.
var modelFields = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[ModelConfig]()
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("mapstructure"), ",")
		m[tag] = true
	}
	return m
}()

// isModelKey says whether key is models.<name>.<field> for a field of
// ModelConfig: entries the file may add beyond the defaults.
func isModelKey(key string) bool {
	parts := strings.Split(key, ".")
	return len(parts) == 3 && parts[0] == "models" && parts[1] != "" && modelFields[parts[2]]
}

// flatten returns every leaf setting of c by its full dotted key (its
// mapstructure tags joined with "."), and the set of keys that name sections.
// It panics on a field without a mapstructure tag: that is a programming
// error, caught by the tests.
func flatten(c Config) (leaves map[string]any, sections map[string]bool) {
	leaves = make(map[string]any)
	sections = make(map[string]bool)
	flattenStruct(reflect.ValueOf(c), "", leaves, sections)
	return leaves, sections
}

func flattenStruct(v reflect.Value, prefix string, leaves map[string]any, sections map[string]bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if tag == "" || tag == "-" || !f.IsExported() {
			panic(fmt.Sprintf("config: field %s.%s needs to be exported and have a mapstructure tag", t, f.Name))
		}
		key := prefix + tag
		fv := v.Field(i)
		if fv.Kind() == reflect.Map {
			// A map of sections (models.<name>): each default entry is a
			// section of its own; the file may add entries (see known).
			sections[key] = true
			for _, name := range fv.MapKeys() {
				entry := key + "." + name.String()
				sections[entry] = true
				flattenStruct(fv.MapIndex(name), entry+".", leaves, sections)
			}
			continue
		}
		if fv.Kind() == reflect.Struct {
			sections[key] = true
			flattenStruct(fv, key+".", leaves, sections)
			continue
		}
		leaves[key] = fv.Interface()
	}
}

var durationType = reflect.TypeFor[time.Duration]()

// decodeHook converts values from the file (YAML scalars) and the
// environment (strings) to the field types, strictly: integers must be whole
// numbers without units, and durations must be Go duration strings (a bare 0
// is allowed). Anything it does not handle is left to mapstructure.
func decodeHook(from, to reflect.Value) (any, error) {
	if !from.IsValid() {
		return nil, nil
	}
	if to.Type() == durationType {
		return toDuration(from)
	}
	if to.Type() == tenantsType && from.Kind() == reflect.String {
		return toTenants(from.String())
	}
	if to.Type() == tenantRetentionsType && from.Kind() == reflect.String {
		return toTenantRetentions(from.String())
	}
	if to.Type() == stringsType && from.Kind() == reflect.String {
		return toStrings(from.String())
	}
	if to.Type() == redactPatternsType && from.Kind() == reflect.String {
		return redactPatterns(from.String())
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return toInt(from, to.Type().Bits())
	case reflect.Float32, reflect.Float64:
		return toFloat(from, to.Type().Bits())
	}
	return from.Interface(), nil
}

const durationHint = `write a Go duration such as "10m" or "30s", or whole days such as "30d"`

var tenantsType = reflect.TypeFor[[]TenantConfig]()

// toTenants reads server.tenants from the environment (CTX_SERVER_TENANTS):
// "name=ENV_VAR,name2=ENV_VAR2", or nothing for none.
func toTenants(s string) (any, error) {
	out := []TenantConfig{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, env, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want name=ENV_VAR, comma-separated", part)
		}
		out = append(out, TenantConfig{Name: strings.TrimSpace(name), TokensEnv: strings.TrimSpace(env)})
	}
	return out, nil
}

func toDuration(from reflect.Value) (any, error) {
	switch from.Kind() {
	case reflect.String:
		s := from.String()
		d, err := ParseDays(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration; %s", s, durationHint)
		}
		return d, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if from.Type() == durationType || from.Int() == 0 {
			return time.Duration(from.Int()), nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if from.Uint() == 0 {
			return time.Duration(0), nil
		}
	case reflect.Float32, reflect.Float64:
		if from.Float() == 0 {
			return time.Duration(0), nil
		}
	default:
		return from.Interface(), nil
	}
	return nil, fmt.Errorf("%v has no unit; %s", from.Interface(), durationHint)
}

func toInt(from reflect.Value, bits int) (any, error) {
	switch from.Kind() {
	case reflect.String:
		s := from.String()
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, bits)
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("%q does not fit in a %d-bit integer", s, bits)
		}
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number (write plain digits, no units)", s)
		}
		return i, nil
	case reflect.Float32, reflect.Float64:
		f := from.Float()
		limit := math.Ldexp(1, bits-1)
		if f != math.Trunc(f) || f < -limit || f >= limit { // NaN fails the first test
			return nil, fmt.Errorf("%v is not a whole number", f)
		}
		return int64(f), nil
	case reflect.Bool:
		return nil, fmt.Errorf("%v is not a number", from.Bool())
	}
	return from.Interface(), nil
}

func toFloat(from reflect.Value, bits int) (any, error) {
	switch from.Kind() {
	case reflect.String:
		s := from.String()
		f, err := strconv.ParseFloat(strings.TrimSpace(s), bits)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return f, nil
	case reflect.Bool:
		return nil, fmt.Errorf("%v is not a number", from.Bool())
	}
	return from.Interface(), nil
}

// namedError is the shape of mapstructure's DecodeError.
type namedError interface {
	error
	Name() string
	Unwrap() error
}

// decodeProblems rewrites the errors of viper's decoder (mapstructure), which
// read "'store.max_payload_bytes' msg" and come wrapped and joined, into one
// error per key reading "store.max_payload_bytes: msg".
func decodeProblems(err error) error {
	var out []error
	var visit func(error)
	visit = func(err error) {
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				visit(inner)
			}
		case namedError:
			if e.Name() == "" {
				out = append(out, e.Unwrap())
			} else {
				out = append(out, fmt.Errorf("%s: %w", e.Name(), e.Unwrap()))
			}
		default:
			if inner := errors.Unwrap(err); inner != nil {
				visit(inner)
				return
			}
			out = append(out, err)
		}
	}
	visit(err)
	return errors.Join(out...)
}

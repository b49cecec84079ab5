package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestLoadRedactionPatterns(t *testing.T) {
	want := []RedactPattern{{Pattern: `AKIA[0-9A-Z]{16}`, Replacement: "[aws-key]"}, {Pattern: `hunter\d+`}}
	t.Run("file", func(t *testing.T) {
		clearEnv(t)
		path := writeFile(t, "redaction:\n  patterns:\n    - pattern: 'AKIA[0-9A-Z]{16}'\n      replacement: '[aws-key]'\n    - pattern: 'hunter\\d+'\n")
		c, err := Load(path)
		if err != nil || !reflect.DeepEqual(c.Redaction.Patterns, want) {
			t.Fatalf("Load = %+v, %v; want %+v", c.Redaction.Patterns, err, want)
		}
	})
	t.Run("env", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("CTX_REDACTION_PATTERNS", `[{"pattern":"AKIA[0-9A-Z]{16}","replacement":"[aws-key]"},{"pattern":"hunter\\d+"}]`)
		c, err := Load(writeFile(t, "# none\n"))
		if err != nil || !reflect.DeepEqual(c.Redaction.Patterns, want) {
			t.Fatalf("Load = %+v, %v; want %+v", c.Redaction.Patterns, err, want)
		}
	})
	t.Run("env not JSON", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("CTX_REDACTION_PATTERNS", `hunter2`)
		if _, err := Load(writeFile(t, "# none\n")); err == nil || !strings.Contains(err.Error(), "redaction.patterns") ||
			!strings.Contains(err.Error(), "is not a JSON list") {
			t.Fatalf("Load = %v, want an error naming redaction.patterns", err)
		}
	})
}

func TestValidateRedaction(t *testing.T) {
	long := strings.Repeat("x", MaxRedactPatternBytes+1)
	for _, tc := range []struct {
		patterns []RedactPattern
		want     []string
	}{
		{[]RedactPattern{{Pattern: "ok"}, {Pattern: "(unclosed"}},
			[]string{`redaction.patterns[1].pattern: "(unclosed" is not an RE2 regular expression`}},
		{[]RedactPattern{{Pattern: `(?<=x)y`}}, []string{`redaction.patterns[0].pattern: "(?<=x)y" is not an RE2`}},
		{[]RedactPattern{{Pattern: ""}}, []string{"redaction.patterns[0].pattern: must not be empty"}},
		{[]RedactPattern{{Pattern: "a*"}}, []string{`redaction.patterns[0].pattern: "a*" matches the empty string`}},
		{[]RedactPattern{{Pattern: long, Replacement: long}}, []string{
			"redaction.patterns[0].pattern: 1025 bytes, at most 1024", "redaction.patterns[0].replacement: 1025 bytes, at most 1024"}},
		{make([]RedactPattern, MaxRedactPatterns+1), []string{"redaction.patterns: 101 patterns, at most 100"}},
	} {
		c := Default()
		c.Redaction.Patterns = tc.patterns
		err := c.Validate()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%.60s) = %v, want %q", fmt.Sprint(tc.patterns), err, w)
			}
		}
	}
	c := Default()
	c.Redaction.Patterns = make([]RedactPattern, MaxRedactPatterns)
	for i := range c.Redaction.Patterns {
		c.Redaction.Patterns[i] = RedactPattern{Pattern: strings.Repeat("y", MaxRedactPatternBytes), Replacement: strings.Repeat("z", MaxRedactPatternBytes)}
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate at the limits = %v", err)
	}
}

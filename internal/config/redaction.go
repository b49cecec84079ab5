package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
)

// RedactionConfig is what ctxinf removes from the requests it sends
// (docs/SECURITY.md, "Redaction").
type RedactionConfig struct {
	// Patterns are applied in order to every text sent to a provider or
	// an embedder: the model steps, the librarian's requests, the texts
	// embedded. What is stored is not changed.
	Patterns []RedactPattern `mapstructure:"patterns"`
}

// RedactPattern replaces every match of Pattern (an RE2 regular
// expression) by Replacement ($1 and ${name} refer to its groups; ""
// means "[redacted]").
type RedactPattern struct {
	Pattern     string `mapstructure:"pattern" json:"pattern"`
	Replacement string `mapstructure:"replacement" json:"replacement"`
}

// Limits of redaction.patterns.
const (
	MaxRedactPatterns     = 100
	MaxRedactPatternBytes = 1024 // of each pattern and each replacement
)

func (r RedactionConfig) validate(p *problems, prefix string) {
	if n := len(r.Patterns); n > MaxRedactPatterns {
		p.addf("%spatterns: %d patterns, at most %d", prefix, n, MaxRedactPatterns)
		return
	}
	for i, rp := range r.Patterns {
		key := fmt.Sprintf("%spatterns[%d]", prefix, i)
		switch {
		case rp.Pattern == "":
			p.addf("%s.pattern: must not be empty", key)
		case len(rp.Pattern) > MaxRedactPatternBytes:
			p.addf("%s.pattern: %d bytes, at most %d", key, len(rp.Pattern), MaxRedactPatternBytes)
		default:
			re, err := regexp.Compile(rp.Pattern)
			if err != nil {
				p.addf("%s.pattern: %q is not an RE2 regular expression: %v", key, rp.Pattern, err)
			} else if re.MatchString("") {
				p.addf("%s.pattern: %q matches the empty string", key, rp.Pattern)
			}
		}
		if len(rp.Replacement) > MaxRedactPatternBytes {
			p.addf("%s.replacement: %d bytes, at most %d", key, len(rp.Replacement), MaxRedactPatternBytes)
		}
	}
}

var redactPatternsType = reflect.TypeFor[[]RedactPattern]()

// redactPatterns decodes redaction.patterns given as a string (from the
// environment, CTX_REDACTION_PATTERNS) as a JSON list of
// {"pattern", "replacement"} objects.
func redactPatterns(s string) (any, error) {
	var out []RedactPattern
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf(`%q is not a JSON list of {"pattern": …, "replacement": …}: %v`, s, err)
	}
	return out, nil
}

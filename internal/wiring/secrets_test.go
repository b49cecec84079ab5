package wiring

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/contextinfinity/ctxinf/internal/config"
)

// Every secret the configuration reads from the environment is kept out
// of the log, in either format.
func TestLoggerScrubsKnownSecrets(t *testing.T) {
	c := config.Default()
	c.Models["gpt"] = config.ModelConfig{Provider: "openai", APIKeyEnv: "CTXINF_TEST_MODEL_KEY"}
	c.Retrieval.EmbedAPIKeyEnv = "CTXINF_TEST_EMBED_KEY"
	c.Server.TokensEnv = "CTXINF_TEST_TOKENS"
	c.Server.Tenants = []config.TenantConfig{{Name: "acme", TokensEnv: "CTXINF_TEST_ACME_TOKENS"}}
	c.Store.Encryption, c.Store.EncryptionKeyEnv = true, "CTXINF_TEST_STORE_KEY"
	secrets := map[string]string{
		"CTXINF_TEST_MODEL_KEY":   "model-key-0123456789",
		"CTXINF_TEST_EMBED_KEY":   "embed-key-0123456789",
		"CTXINF_TEST_TOKENS":      "token-one-0123456789, token-two-0123456789",
		"CTXINF_TEST_ACME_TOKENS": "acme-token-0123456789",
		"CTXINF_TEST_STORE_KEY":   "00112233445566778899aabbccddeeff",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	scrub := Scrubber(c, os.Getenv)
	for _, format := range []string{config.FormatJSON, config.FormatConsole} {
		var out bytes.Buffer
		log := Logger(config.LogConfig{Level: config.LevelInfo, Format: format}, &out, scrub)
		log.Warn().Err(errors.New("401: model-key-0123456789 embed-key-0123456789 sk-abcdefghijklmnopqrstuvwxyz")).
			Str("auth", "Bearer token-two-0123456789").Str("token", "token-one-0123456789").
			Str("tenant", "acme-token-0123456789").Str("key", "00112233445566778899aabbccddeeff").Msg("upstream refused")
		got := out.String()
		for _, secret := range []string{"model-key", "embed-key", "token-one", "token-two", "sk-abc", "acme-token", "0011223344"} {
			if strings.Contains(got, secret) {
				t.Errorf("%s log holds %s: %s", format, secret, got)
			}
		}
		if !strings.Contains(got, "upstream refused") || strings.Count(got, "[redacted]") != 7 {
			t.Errorf("%s log %q, want the line with 7 secrets redacted", format, got)
		}
	}
}

func TestRuntimeRedactor(t *testing.T) {
	c := config.Default()
	if r, err := Redactor(c); r != nil || err != nil {
		t.Errorf("no patterns: %v, %v; want nil, nil", r, err)
	}
	c.Redaction.Patterns = []config.RedactPattern{{Pattern: `hunter\d+`}, {Pattern: `(a)(b)`, Replacement: "$2$1"}}
	r, err := Redactor(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Text("ab hunter2"); got != "ba [redacted]" {
		t.Errorf("Text = %q", got)
	}
}

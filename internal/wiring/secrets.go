package wiring

import (
	"fmt"
	"strings"

	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/providers"
)

// Scrubber is the Scrubber of the secrets c names in the environment,
// read with getenv (nil reads none): every configured model's API key
// (models.*.api_key_env), the embedder's (retrieval.embed_api_key_env),
// the server's bearer tokens (server.tokens_env, each tenant's) and the
// store's key. It scrubs the log and every error the runtime stores.
func Scrubber(c config.Config, getenv func(string) string) *providers.Scrubber {
	env := Env{Getenv: getenv}
	var secrets []string
	for _, m := range c.Models {
		secrets = append(secrets, env.getenv(m.APIKeyEnv))
	}
	secrets = append(secrets, env.getenv(c.Retrieval.EmbedAPIKeyEnv))
	secrets = append(secrets, strings.Split(env.getenv(c.Server.TokensEnv), ",")...)
	for _, t := range c.Server.Tenants {
		secrets = append(secrets, strings.Split(env.getenv(t.TokensEnv), ",")...)
	}
	if c.Store.Encryption {
		secrets = append(secrets, env.getenv(c.Store.EncryptionKeyEnv)) // the store's key, as written
	}
	return providers.NewScrubber(secrets...)
}

// Redactor compiles redaction.patterns (validated at load already).
func Redactor(c config.Config) (*providers.Redactor, error) {
	rules := make([]providers.RedactRule, len(c.Redaction.Patterns))
	for i, p := range c.Redaction.Patterns {
		rules[i] = providers.RedactRule{Pattern: p.Pattern, Replacement: p.Replacement}
	}
	r, err := providers.NewRedactor(rules)
	if err != nil {
		return nil, fmt.Errorf("redaction.patterns: %w", err)
	}
	return r, nil
}

package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/contextinfinity/ctxinf/internal/config"
	"github.com/contextinfinity/ctxinf/providers"
)

// runtimeScrubber is the Scrubber of the secrets c reads from the
// environment: every configured model's API key (models.*.api_key_env),
// the embedder's (retrieval.embed_api_key_env) and the server's bearer
// tokens (server.tokens_env). It scrubs the log and every error the
// runtime stores.
func runtimeScrubber(c config.Config) *providers.Scrubber {
	var secrets []string
	for _, m := range c.Models {
		if m.APIKeyEnv != "" {
			secrets = append(secrets, os.Getenv(m.APIKeyEnv))
		}
	}
	if env := c.Retrieval.EmbedAPIKeyEnv; env != "" {
		secrets = append(secrets, os.Getenv(env))
	}
	if env := c.Server.TokensEnv; env != "" {
		secrets = append(secrets, strings.Split(os.Getenv(env), ",")...)
	}
	for _, t := range c.Server.Tenants { // every tenant's tokens
		if t.TokensEnv != "" {
			secrets = append(secrets, strings.Split(os.Getenv(t.TokensEnv), ",")...)
		}
	}
	if env := c.Store.EncryptionKeyEnv; env != "" && c.Store.Encryption {
		secrets = append(secrets, os.Getenv(env)) // the store's key, as written
	}
	return providers.NewScrubber(secrets...)
}

// runtimeRedactor compiles redaction.patterns (validated at load already).
func runtimeRedactor(c config.Config) (*providers.Redactor, error) {
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

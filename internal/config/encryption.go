package config

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (c StoreConfig) validateEncryption(p *problems, prefix string) {
	if c.EncryptionKeyEnv != "" {
		if _, err := ParseEncryptionKey(c.EncryptionKeyEnv); err == nil {
			p.addf("%sencryption_key_env: names the environment variable that holds the key, and this looks like a key: "+
				"an encryption key is never read from the configuration; put it in that variable or in %sencryption_key_file",
				prefix, prefix)
		} else if !envName.MatchString(c.EncryptionKeyEnv) {
			p.addf("%sencryption_key_env: %q is not an environment variable name (letters, digits and '_', not starting with a digit)",
				prefix, c.EncryptionKeyEnv)
		}
	}
	if c.Encryption && c.EncryptionKeyFile == "" && c.EncryptionKeyEnv == "" {
		p.addf("%sencryption: true needs a key: set %sencryption_key_env or %sencryption_key_file", prefix, prefix, prefix)
	}
	if !c.Encryption && c.EncryptionKeyFile != "" {
		p.addf("%sencryption_key_file: is set but %sencryption is false: set %sencryption: true to encrypt, or unset the file",
			prefix, prefix, prefix)
	}
	p.durationIn(prefix+"encryption_key_rotation", c.EncryptionKeyRotation, time.Hour, 87600*time.Hour)
}

// EncryptionKey returns the key that encrypts the data directory at rest,
// or nil when store.encryption is false. It reads the file named by
// store.encryption_key_file if set, else the environment variable named
// by store.encryption_key_env, and parses it with ParseEncryptionKey. A
// missing variable or file, a key file inside the data directory, or a
// key that is not 16, 24 or 32 bytes is an error naming the setting; the
// key itself is never in an error.
func (c Config) EncryptionKey() ([]byte, error) {
	s := c.Store
	if !s.Encryption {
		return nil, nil
	}
	if s.EncryptionKeyFile != "" {
		inside, err := within(s.EncryptionKeyFile, c.DataDir)
		if err != nil {
			return nil, fmt.Errorf("store.encryption_key_file: %w", err)
		}
		if inside {
			return nil, fmt.Errorf("store.encryption_key_file: %s is inside the data directory %s: "+
				"keep the key apart from the data it protects", s.EncryptionKeyFile, c.DataDir)
		}
		b, err := os.ReadFile(s.EncryptionKeyFile)
		if err != nil {
			// *fs.PathError names the file.
			return nil, fmt.Errorf("store.encryption_key_file: %w", err)
		}
		k, err := ParseEncryptionKey(string(b))
		if err != nil {
			return nil, fmt.Errorf("store.encryption_key_file %s: %w", s.EncryptionKeyFile, err)
		}
		return k, nil
	}
	v, ok := os.LookupEnv(s.EncryptionKeyEnv)
	if !ok || strings.TrimSpace(v) == "" {
		return nil, fmt.Errorf("store.encryption is true but the environment variable %s (store.encryption_key_env) is not set: "+
			"set it to the store's key (e.g. from `openssl rand -hex 32` for a new store), or name the key's file in store.encryption_key_file",
			s.EncryptionKeyEnv)
	}
	k, err := ParseEncryptionKey(v)
	if err != nil {
		return nil, fmt.Errorf("environment variable %s (store.encryption_key_env): %w", s.EncryptionKeyEnv, err)
	}
	return k, nil
}

// ParseEncryptionKey decodes a key of 16, 24 or 32 bytes (AES-128, -192,
// -256) written as hex (32, 48 or 64 hex digits) or standard base64 (with
// or without padding); surrounding white space is ignored. A string of hex
// digits only is read as hex.
func ParseEncryptionKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	var (
		k    []byte
		err  error
		form string
	)
	if isHex(s) {
		form = fmt.Sprintf("%d hex digits", len(s))
		k, err = hex.DecodeString(s)
	} else {
		form = "base64"
		k, err = base64.StdEncoding.DecodeString(s)
		if err != nil {
			k, err = base64.RawStdEncoding.DecodeString(s)
		}
	}
	if err != nil || len(s) == 0 {
		return nil, errors.New("not a key: want 16, 24 or 32 bytes written as 32, 48 or 64 hex digits or as base64")
	}
	switch len(k) {
	case 16, 24, 32:
		return k, nil
	}
	return nil, fmt.Errorf("a key of %d bytes (%s): want 16, 24 or 32 bytes (AES-128, AES-192 or AES-256), "+
		"written as 32, 48 or 64 hex digits or as base64", len(k), form)
}

func isHex(s string) bool {
	if len(s) == 0 || len(s)%2 != 0 {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
			return false
		}
	}
	return true
}

// within reports whether path is dir or inside it, after resolving both
// to absolute paths and, where they exist, following symbolic links.
func within(path, dir string) (bool, error) {
	resolve := func(p string) (string, error) {
		a, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		// The longest existing prefix is resolved, the rest kept.
		rest := ""
		for cur := a; ; cur = filepath.Dir(cur) {
			if r, err := filepath.EvalSymlinks(cur); err == nil {
				return filepath.Join(r, rest), nil
			}
			if filepath.Dir(cur) == cur {
				return a, nil
			}
			rest = filepath.Join(filepath.Base(cur), rest)
		}
	}
	p, err := resolve(path)
	if err != nil {
		return false, err
	}
	d, err := resolve(dir)
	if err != nil {
		return false, err
	}
	rel, err := filepath.Rel(d, p)
	if err != nil {
		return false, nil
	}
	return rel == "." || rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)), nil
}

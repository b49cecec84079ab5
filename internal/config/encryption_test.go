package config

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEncryptionKey(t *testing.T) {
	for _, n := range []int{16, 24, 32} {
		k := bytes.Repeat([]byte{0xa7}, n)
		k[0] = byte(n)
		for _, s := range []string{hex.EncodeToString(k), strings.ToUpper(hex.EncodeToString(k)) + "\n",
			base64.StdEncoding.EncodeToString(k), " " + base64.RawStdEncoding.EncodeToString(k) + "\n"} {
			got, err := ParseEncryptionKey(s)
			if err != nil || !bytes.Equal(got, k) {
				t.Errorf("ParseEncryptionKey(%q) = %x, %v; want %x", s, got, err, k)
			}
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "not a key"},
		{"correct horse battery staple", "not a key"},
		{strings.Repeat("ab", 20), "a key of 20 bytes (40 hex digits): want 16, 24 or 32 bytes"},
		{base64.StdEncoding.EncodeToString(make([]byte, 31)), "a key of 31 bytes (base64)"},
	} {
		if _, err := ParseEncryptionKey(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseEncryptionKey(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

// The key comes from the environment or a key file, never from the
// configuration; a missing or bad one is an error naming the setting
// that does not hold the key.
func TestLoadEncryptionKey(t *testing.T) {
	const key = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	want, _ := hex.DecodeString(key)
	load := func(t *testing.T, file string, env map[string]string) (Config, error) {
		t.Helper()
		clearEnv(t)
		t.Chdir(t.TempDir())
		for k, v := range env {
			t.Setenv(k, v)
		}
		c, err := Load(writeFile(t, file))
		if err != nil {
			return c, err
		}
		_, err = c.EncryptionKey()
		return c, err
	}

	c, err := load(t, "store:\n  encryption: true\n", map[string]string{"CTX_STORE_KEY": key})
	if got, kerr := c.EncryptionKey(); err != nil || kerr != nil || !bytes.Equal(got, want) {
		t.Fatalf("key from CTX_STORE_KEY = %x, %v, %v", got, err, kerr)
	}
	c, err = load(t, "store:\n  encryption_key_env: MY_KEY\n", map[string]string{"CTX_STORE_ENCRYPTION": "true", "MY_KEY": key})
	if got, kerr := c.EncryptionKey(); err != nil || kerr != nil || !bytes.Equal(got, want) {
		t.Fatalf("key from MY_KEY = %x, %v, %v", got, err, kerr)
	}
	c, err = load(t, "store:\n  gc_interval: 1m\n", map[string]string{"CTX_STORE_KEY": key})
	if got, kerr := c.EncryptionKey(); err != nil || kerr != nil || got != nil {
		t.Fatalf("encryption off: key %x, %v, %v; want none", got, err, kerr)
	}

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "store.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(want)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = load(t, "data_dir: "+filepath.Join(dir, "data")+"\nstore:\n  encryption: true\n  encryption_key_file: "+keyFile+"\n", nil)
	if got, kerr := c.EncryptionKey(); err != nil || kerr != nil || !bytes.Equal(got, want) {
		t.Fatalf("key from %s = %x, %v, %v", keyFile, got, err, kerr)
	}

	inside := filepath.Join(dir, "data", "keys", "store.key")
	os.MkdirAll(filepath.Dir(inside), 0o700)
	os.WriteFile(inside, []byte(key), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(filepath.Join(dir, "data"), link)

	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"a key in the file", "store:\n  encryption: true\n  encryption_key: " + key + "\n", nil,
			"store.encryption_key: an encryption key is never read from the configuration file"},
		{"a key in encryption_key_env", "store:\n  encryption: true\n  encryption_key_env: " + key + "\n", nil,
			"store.encryption_key_env: names the environment variable that holds the key, and this looks like a key"},
		{"not a variable name", "store:\n  encryption_key_env: my-key\n", nil,
			`store.encryption_key_env: "my-key" is not an environment variable name`},
		{"the variable unset", "store:\n  encryption: true\n", nil,
			"store.encryption is true but the environment variable CTX_STORE_KEY (store.encryption_key_env) is not set"},
		{"a short key", "store:\n  encryption: true\n", map[string]string{"CTX_STORE_KEY": key[:40]},
			"environment variable CTX_STORE_KEY (store.encryption_key_env): a key of 20 bytes (40 hex digits): want 16, 24 or 32 bytes"},
		{"a key file without encryption", "store:\n  encryption_key_file: " + keyFile + "\n", nil,
			"store.encryption_key_file: is set but store.encryption is false"},
		{"no key source", "store:\n  encryption: true\n  encryption_key_env: \"\"\n", nil,
			"store.encryption: true needs a key"},
		{"a missing key file", "store:\n  encryption: true\n  encryption_key_file: " + filepath.Join(dir, "nope") + "\n", nil,
			"store.encryption_key_file: open " + filepath.Join(dir, "nope")},
		{"a key file in the data dir", "data_dir: " + filepath.Join(dir, "data") + "\nstore:\n  encryption: true\n  encryption_key_file: " + inside + "\n", nil,
			"is inside the data directory"},
		{"a key file in the data dir through a link", "data_dir: " + link + "\nstore:\n  encryption: true\n  encryption_key_file: " + inside + "\n", nil,
			"is inside the data directory"},
		{"rotation too short", "store:\n  encryption_key_rotation: 1m\n", nil, "store.encryption_key_rotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.file, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), key[:32]) {
				t.Errorf("error %v shows the key", err)
			}
		})
	}
}

package badgerdb

import (
	"github.com/contextinfinity/ctxinf/persistence"

	"crypto/aes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
)

// badgerSanity is the text Badger writes, encrypted under its key when
// there is one, after a 16-byte IV at the start of its KEYREGISTRY file.
const badgerSanity = "Hello Badger"

// checkEncryption tells a store of dir that was created with encryption
// from one created without, by Badger's KEYREGISTRY file, and returns an
// error naming what to do if c (nil: no key) does not match it. A store
// with no such file yet is new.
func checkEncryption(dir string, c *persistence.Cipher) error {
	f, err := os.Open(filepath.Join(dir, badger.KeyRegistryFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the key registry: %w", err)
	}
	defer f.Close()
	head := make([]byte, aes.BlockSize+len(badgerSanity))
	if _, err := f.ReadAt(head, 0); err != nil {
		return fmt.Errorf("read the key registry %s: %w", f.Name(), err)
	}
	plain := string(head[aes.BlockSize:]) == badgerSanity
	switch {
	case plain && c != nil:
		return fmt.Errorf("%w: the store was created without encryption; open it without a key "+
			"(store.encryption: false), or export it and import it into a new data directory opened with the key", persistence.ErrNotEncrypted)
	case !plain && c == nil:
		return fmt.Errorf("%w: the store was created with encryption; give its key "+
			"(store.encryption: true with store.encryption_key_env or store.encryption_key_file)", persistence.ErrEncrypted)
	}
	return nil
}

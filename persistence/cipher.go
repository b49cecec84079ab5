package persistence

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Encryption at rest (SRD §14.3; docs/SECURITY.md). One master key, of 16,
// 24 or 32 bytes, encrypts everything the store writes that holds
// conversation text:
//
//   - Badger's files, with Badger's own encryption (AES-CTR under data
//     keys that Badger rotates, themselves encrypted in its KEYREGISTRY
//     file under a key derived from the master key);
//   - Badger's redo log (badgerdb/redo.go) and the stream journals
//     (journal.go), with AES-GCM under keys derived from the master key
//     by HKDF-SHA256: one key per redo lap and one per journal file,
//     each record or line sealed on its own with a random 12-byte
//     nonce, so that a torn tail is still told from the records before
//     it.
//
// Every derived key has the master key's length (AES-128, -192 or -256 as
// the master key is). A sealed record starts with the key's id, four bytes
// derived from the master key, so that data under another key is told
// apart from corrupt data.

var (
	// ErrWrongKey is returned when a store, redo log or journal was
	// encrypted with another key than the one given.
	ErrWrongKey = errors.New("persistence: wrong encryption key")
	// ErrEncrypted is returned when a store, redo log or journal is
	// encrypted and no key was given.
	ErrEncrypted = errors.New("persistence: the data is encrypted and no encryption key was given")
	// ErrNotEncrypted is returned when a key was given for a store, redo
	// log or journal written without encryption.
	ErrNotEncrypted = errors.New("persistence: an encryption key was given but the data is not encrypted")
)

const (
	keyIDLen = 4
	nonceLen = 12
	// SealOverhead is what sealing adds to a plaintext: key id, nonce, tag.
	SealOverhead = keyIDLen + nonceLen + 16
)

// Cipher holds the keys derived from a master key. It is safe for
// concurrent use.
type Cipher struct {
	prk    []byte // HKDF-Extract of the master key
	keyLen int
	badger []byte
	id     [keyIDLen]byte
}

// NewCipher derives the store's keys from master, which must be 16, 24 or
// 32 bytes long (AES-128, AES-192, AES-256). It keeps no copy of master.
func NewCipher(master []byte) (*Cipher, error) {
	switch len(master) {
	case 16, 24, 32:
	default:
		return nil, fmt.Errorf("%w: encryption key of %d bytes, want 16, 24 or 32 (AES-128, AES-192 or AES-256)",
			ErrInvalidArgument, len(master))
	}
	prk, err := hkdf.Extract(sha256.New, master, []byte("ctxinf encryption at rest"))
	if err != nil {
		return nil, err
	}
	c := &Cipher{prk: prk, keyLen: len(master)}
	if c.badger, err = c.derive("badger store key"); err != nil {
		return nil, err
	}
	id, err := hkdf.Expand(sha256.New, prk, "key id", keyIDLen)
	if err != nil {
		return nil, err
	}
	copy(c.id[:], id)
	return c, nil
}

// StoreKey is the key an engine encrypts its own files with (Badger's
// encryption at rest), derived from the master key.
func (c *Cipher) StoreKey() []byte { return c.badger }

// KeyBits is the AES key size in bits: 128, 192 or 256.
func (c *Cipher) KeyBits() int { return 8 * c.keyLen }

func (c *Cipher) derive(info string) ([]byte, error) {
	return hkdf.Expand(sha256.New, c.prk, info, c.keyLen)
}

// aead returns the AES-GCM of the key derived for info.
func (c *Cipher) aead(info string) (cipher.AEAD, error) {
	k, err := c.derive(info)
	if err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// journalAEAD is the AEAD of the journal of step (one key per file).
func (c *Cipher) journalAEAD(stem string) (cipher.AEAD, error) {
	return c.aead("stream journal " + stem)
}

// RedoAEAD is the AEAD of the redo log's lap (one key per lap).
func (c *Cipher) RedoAEAD(lap uint64) (cipher.AEAD, error) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], lap)
	return c.aead("redo lap " + string(b[:]))
}

// Seal appends to dst the key id, a random nonce and the sealed plain.
func (c *Cipher) Seal(dst []byte, a cipher.AEAD, plain, ad []byte) []byte {
	dst = append(dst, c.id[:]...)
	n := len(dst)
	dst = append(dst, make([]byte, nonceLen)...)
	// crypto/rand.Read never fails (it crashes the program instead).
	_, _ = rand.Read(dst[n:])
	return a.Seal(dst, dst[n:n+nonceLen], plain, ad)
}

// errOpen is returned by Open for a record that does not authenticate.
var errOpen = errors.New("authentication failed")

// Open opens what seal wrote, appending the plaintext to dst. A record of
// another key is ErrWrongKey; one that does not authenticate, errOpen.
func (c *Cipher) Open(dst []byte, a cipher.AEAD, sealed, ad []byte) ([]byte, error) {
	if len(sealed) < SealOverhead {
		return nil, errOpen
	}
	if !bytes.Equal(sealed[:keyIDLen], c.id[:]) {
		return nil, ErrWrongKey
	}
	out, err := a.Open(dst, sealed[keyIDLen:keyIDLen+nonceLen], sealed[keyIDLen+nonceLen:], ad)
	if err != nil {
		return nil, errOpen
	}
	return out, nil
}

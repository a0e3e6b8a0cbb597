// Package secrets keeps the values of E2B's secrets: sealed with AES-256-GCM
// under a key of the data dir (or the operator's --secrets-key-file) before
// they reach the store, opened only when the egress proxy fills a
// `${e2b.secrets.NAME}` placeholder into a request. No read of its API
// returns a value.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeyFile is the key's file in the data dir when the operator names none.
const KeyFile = "secrets.key"

// LoadOrCreateKey reads the 32-byte key (64 hex digits) at path, making
// it — readable by the owner only — if it does not exist and create is
// set (the data dir's key; an operator's file must exist).
func LoadOrCreateKey(path string, create bool) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		return createKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secrets key %s is mode %v: it must be readable by its owner only (chmod 600)", path, fi.Mode().Perm())
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("secrets key %s: want 64 hex digits (a 256-bit AES key)", path)
	}
	return key, nil
}

func createKey(path string) ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// O_EXCL: two daemons racing to make the key must not end with two.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return key, f.Close()
}

// sealer is AES-256-GCM with a random 96-bit nonce per value, the
// secret's id as additional data (a sealed value moved to another secret's
// row does not open).
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(id string, value []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(value)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return s.aead.Seal(nonce, nonce, value, []byte(id)), nil
}

func (s *sealer) open(id string, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed value too short")
	}
	out, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(id))
	if err != nil {
		return nil, errors.New("sealed value does not open with this key (was --secrets-key-file changed?)")
	}
	return out, nil
}

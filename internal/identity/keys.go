package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// signingKey is one ES256 key of the issuer. A key signs from Created for
// RotateEvery; its public half stays in the JWKS until every token it
// signed has expired.
type signingKey struct {
	ID      string    `json:"kid"`
	Created time.Time `json:"created"`
	// Retired is when a newer key took over (zero: the current key).
	Retired time.Time `json:"retired,omitzero"`
	PEM     string    `json:"pem"`
	priv    *ecdsa.PrivateKey
}

func newKey(now time.Time) (*signingKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 8)
	rand.Read(id)
	return &signingKey{ID: hex.EncodeToString(id), Created: now.UTC(), priv: priv,
		PEM: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))}, nil
}

func (k *signingKey) parse() error {
	b, _ := pem.Decode([]byte(k.PEM))
	if b == nil {
		return fmt.Errorf("key %s: no PEM block", k.ID)
	}
	p, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return fmt.Errorf("key %s: %w", k.ID, err)
	}
	ec, ok := p.(*ecdsa.PrivateKey)
	if !ok {
		return fmt.Errorf("key %s: not an ECDSA key", k.ID)
	}
	k.priv = ec
	return nil
}

// loadKeys reads the key file (none yet: no keys).
func loadKeys(path string) ([]*signingKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("oidc keys: %w", err)
	}
	var keys []*signingKey
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, fmt.Errorf("oidc keys %s: %w", path, err)
	}
	for _, k := range keys {
		if err := k.parse(); err != nil {
			return nil, fmt.Errorf("oidc keys %s: %w", path, err)
		}
	}
	return keys, nil
}

// saveKeys replaces the key file atomically, readable by the owner only.
func saveKeys(path string, keys []*signingKey) error {
	b, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

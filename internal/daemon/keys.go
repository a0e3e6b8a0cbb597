package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// KeyFile is where, under the data dir, the daemon keeps the API key it
// generated at first start (mode 0600), so it can print it on every start
// and the CLI can read it.
const KeyFile = "api-key"

// NewAPIKey returns a key in the format E2B SDKs accept (^e2b_[0-9a-f]+$).
func NewAPIKey() string {
	b := make([]byte, 20)
	rand.Read(b)
	return "e2b_" + hex.EncodeToString(b)
}

// ensureAPIKey returns the daemon's API key, generating and recording one at
// first start.
func ensureAPIKey(ctx context.Context, st *store.Store, dataDir string) (string, error) {
	path := filepath.Join(dataDir, KeyFile)
	b, err := os.ReadFile(path)
	if err == nil {
		key := strings.TrimSpace(string(b))
		ok, err := st.HasAPIKey(ctx, key)
		if err != nil {
			return "", fmt.Errorf("api key: %w", err)
		}
		if !ok {
			// Already there: another daemon of the cluster added it first.
			if err := st.AddAPIKey(ctx, "default", key, time.Now()); err != nil && !errors.Is(err, errdefs.ErrAlreadyExists) {
				return "", err
			}
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read api key: %w", err)
	}
	key := NewAPIKey()
	if err := st.AddAPIKey(ctx, "default", key, time.Now()); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", err
	}
	return key, nil
}

// FindBinary resolves a helper binary: the flag's value, else next to the
// forkbox executable, else on PATH.
func FindBinary(flag, name string) (string, error) {
	if flag != "" {
		if _, err := os.Stat(flag); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return filepath.Abs(flag)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found next to forkbox or on PATH (run `make build`, or pass --%s)", name, strings.TrimPrefix(name, "forkbox-"))
}

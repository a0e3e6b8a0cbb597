package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/secrets"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/tlsca"
)

// openData opens the records, loads (or makes) what the data dir or the
// cluster keeps, and issues the TLS listener's certificate of that CA.
func openData(ctx context.Context, o *Options, lns *listeners) (*store.Store, string, *secrets.Vault, error) {
	st, err := openStore(ctx, *o)
	if err != nil {
		return nil, "", nil, err
	}
	if err := checkNodeID(ctx, *o, st, lns); err != nil {
		st.Close()
		return nil, "", nil, err
	}
	key, vault, err := prepareData(ctx, o, st)
	if err == nil {
		err = lns.tls.certify(*o)
	}
	if err != nil {
		st.Close()
		return nil, "", nil, err
	}
	return st, key, vault, nil
}

// openStore opens the records: the PostgreSQL of --database, shared by a
// cluster of daemons, or the data dir's SQLite file.
func openStore(ctx context.Context, o Options) (*store.Store, error) {
	if o.Database == "" {
		return store.Open(ctx, o.DataDir)
	}
	st, err := store.OpenURL(ctx, o.Database)
	if err != nil {
		return nil, fmt.Errorf("--database: %w", err)
	}
	o.Logger.Info("records in postgresql", "database", redacted(o.Database))
	return st, nil
}

// clusterFile is a set of files of the data dir that every daemon of a
// cluster must hold the same: made once (by whichever daemon comes
// first), kept in the database, written into each daemon's data dir,
// where the code that reads them on a single node finds them.
type clusterFile struct {
	name  string   // its key in the database
	paths []string // relative to the data dir
	// make creates the files under dir, as a single node does.
	make func(dir string) error
}

// clusterFiles are the API key, the data plane's TLS CA, the egress CA and
// the secrets vault's key (unless the operator names a key file, which
// every node must then be given).
func clusterFiles(o Options) []clusterFile {
	files := []clusterFile{
		{"api-key", []string{KeyFile}, func(dir string) error {
			return os.WriteFile(filepath.Join(dir, KeyFile), []byte(NewAPIKey()+"\n"), 0o600)
		}},
		{"tls-ca", []string{filepath.Join("tls", tlsca.CertFile), filepath.Join("tls", tlsca.KeyFile)}, func(dir string) error {
			_, err := tlsca.LoadOrCreate(filepath.Join(dir, "tls"))
			return err
		}},
		{"egress-ca", []string{filepath.Join(egressCADir, tlsca.CertFile), filepath.Join(egressCADir, tlsca.KeyFile)}, func(dir string) error {
			_, err := tlsca.LoadOrCreateCA(filepath.Join(dir, egressCADir), egressCAName)
			return err
		}},
	}
	if o.SecretsKeyFile == "" {
		files = append(files, clusterFile{"secrets-key", []string{secrets.KeyFile}, func(dir string) error {
			_, err := secrets.LoadOrCreateKey(filepath.Join(dir, secrets.KeyFile), true)
			return err
		}})
	}
	return files
}

// shareClusterFiles makes the cluster-wide files the same on this daemon
// as on every other of the database: the first daemon's files are
// recorded (INSERT … ON CONFLICT DO NOTHING, then read back, so daemons
// starting at once agree), and the recorded ones replace the data dir's.
func shareClusterFiles(ctx context.Context, o Options, st *store.Store) error {
	for _, cf := range clusterFiles(o) {
		value, err := st.ClusterValue(ctx, cf.name)
		if err != nil {
			if value, err = makeClusterValue(ctx, o.DataDir, st, cf); err != nil {
				return fmt.Errorf("cluster %s: %w", cf.name, err)
			}
		}
		var files map[string][]byte
		if err := json.Unmarshal(value, &files); err != nil {
			return fmt.Errorf("cluster %s: %w", cf.name, err)
		}
		for _, rel := range cf.paths {
			if err := writeClusterFile(filepath.Join(o.DataDir, rel), files[rel]); err != nil {
				return fmt.Errorf("cluster %s: %w", cf.name, err)
			}
		}
	}
	return nil
}

// makeClusterValue makes cf's files in a scratch directory and records
// them, returning what the database holds (another daemon's if it won).
func makeClusterValue(ctx context.Context, dataDir string, st *store.Store, cf clusterFile) ([]byte, error) {
	dir, err := os.MkdirTemp(dataDir, ".cluster-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := cf.make(dir); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, rel := range cf.paths {
		if files[rel], err = os.ReadFile(filepath.Join(dir, rel)); err != nil {
			return nil, err
		}
	}
	value, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	return st.EnsureClusterValue(ctx, cf.name, value)
}

// writeClusterFile replaces path with data unless it holds data already
// (mode 0600 but for a CA's certificate, which clients are pointed at).
func writeClusterFile(path string, data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%s: the database holds no content", path)
	}
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	mode := os.FileMode(0o600)
	if filepath.Base(path) == tlsca.CertFile {
		mode = 0o644
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// redacted is a database URL without its password, for logs.
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

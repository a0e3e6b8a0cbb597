package agent

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// EgressCAPath is where the agent keeps the egress proxy's CA: Debian's
// directory of local CAs, so an update-ca-certificates run inside the
// sandbox (a package install) puts it in the rebuilt bundle again.
const EgressCAPath = "/usr/local/share/ca-certificates/forkbox-egress.crt"

// caBundles are the system trust bundles of the common distributions the
// CA is appended to; those an image lacks are left alone.
var caBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
	"/etc/ssl/cert.pem",                  // Alpine, Arch: often a link to one above
}

// installEgressCA makes the sandbox trust caPEM, the egress proxy's CA
// (which the daemon sends in /init): it appends it to every system bundle
// under root and keeps it at EgressCAPath. It is idempotent and cheap when
// done: /init follows every restore, and a restored image that has the CA
// reads one small file and stops. It reports whether the CA is trusted
// now (false for an image without any bundle, which is left alone).
func installEgressCA(root string, caPEM []byte) (bool, error) {
	if b, _ := pem.Decode(caPEM); b == nil || b.Type != "CERTIFICATE" {
		return false, errors.New("egress CA: not a PEM certificate")
	}
	marker := filepath.Join(root, EgressCAPath)
	if have, err := os.ReadFile(marker); err == nil && bytes.Equal(have, caPEM) {
		return true, nil
	}
	var done []string
	for _, b := range caBundles {
		real, err := filepath.EvalSymlinks(filepath.Join(root, b))
		if err != nil || slices.Contains(done, real) {
			continue // absent, or a link to a bundle already done
		}
		if err := appendCert(real, caPEM); err != nil {
			return false, err
		}
		done = append(done, real)
	}
	if len(done) == 0 {
		return false, nil
	}
	// The marker last: a crash before it makes the next /init append again
	// (a duplicate certificate in a bundle is harmless).
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return false, fmt.Errorf("egress CA: %w", err)
	}
	if err := os.WriteFile(marker+".tmp", caPEM, 0o644); err != nil {
		return false, fmt.Errorf("egress CA: %w", err)
	}
	if err := os.Rename(marker+".tmp", marker); err != nil {
		return false, fmt.Errorf("egress CA: %w", err)
	}
	return true, nil
}

// appendCert appends caPEM to the bundle at path, on a line of its own.
func appendCert(path string, caPEM []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("egress CA: %w", err)
	}
	defer f.Close()
	var last [1]byte
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		if _, err := f.ReadAt(last[:], fi.Size()-1); err != nil {
			return fmt.Errorf("egress CA: read %s: %w", path, err)
		}
	}
	out := caPEM
	if last[0] != 0 && last[0] != '\n' {
		out = append([]byte{'\n'}, caPEM...)
	}
	if _, err := f.Write(out); err != nil {
		return fmt.Errorf("egress CA: append to %s: %w", path, err)
	}
	return f.Close()
}

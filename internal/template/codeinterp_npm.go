package template

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// HostCABundle is the host's CA bundle; npm in the rootfs uses it for the
// registry while the template is built (a TLS-inspecting proxy's CA is
// trusted on the host, not in a fresh rootfs), and so do the RUN steps of
// user template builds. It is not left in the image.
const HostCABundle = "/etc/ssl/certs/ca-certificates.crt"

// installNPM installs CodeInterpreterNPM globally with the rootfs's own npm
// (base has Node.js and npm) and drops npm's cache.
func installNPM(ctx context.Context, w io.Writer, start time.Time, root string) error {
	args := []string{root, "env", "HOME=/root", "npm", "install", "-g", "--no-audit", "--no-fund", "--loglevel=error"}
	if b, err := os.ReadFile(HostCABundle); err == nil {
		ca := filepath.Join(root, "tmp", "forkbox-host-ca.crt")
		if err := os.WriteFile(ca, b, 0o644); err != nil {
			return err
		}
		defer os.Remove(ca)
		args = append(args, "--cafile=/tmp/forkbox-host-ca.crt")
	}
	args = append(args, CodeInterpreterNPM...)
	progress(w, "template %s: npm install -g %s", CodeInterpreterID, strings.Join(CodeInterpreterNPM, " "))
	// npm 9 may end with "Exit handler never called!" after installing
	// everything; the check below decides.
	runLogged(ctx, w, start, func(line string) (string, bool) { return "npm: " + line, false }, "chroot", args...)
	if _, err := os.Stat(filepath.Join(root, "usr/local/bin/ijskernel")); err != nil {
		return fmt.Errorf("npm install -g %s: ijskernel not installed", strings.Join(CodeInterpreterNPM, " "))
	}
	check := []string{root, "node", "-e", "require('/usr/local/lib/node_modules/ijavascript/node_modules/zeromq')"}
	if err := runLogged(ctx, w, start, func(line string) (string, bool) { return "node: " + line, true }, "chroot", check...); err != nil {
		return fmt.Errorf("ijavascript's zeromq module does not load: %w", err)
	}
	os.RemoveAll(filepath.Join(root, "root/.npm"))
	return nil
}

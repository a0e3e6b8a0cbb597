package e2e

import "testing"

// TestQuotaE2B runs js/quota.mjs with the npm `e2b` client against a daemon
// capped at two running sandboxes (--max-sandboxes 2; its pool of
// sandboxes restored ahead does not count), then checks the daemon lists
// none: the refused calls left nothing behind and the file killed its own.
func TestQuotaE2B(t *testing.T) {
	dir := jsDir(t)
	d := startDaemon(t, "--max-sandboxes", "2")
	runNode(t, dir, clientEnv(d), "--test", "--test-reporter=spec", "quota.mjs")
	if ids := d.SandboxIDs(); len(ids) > 0 {
		t.Errorf("sandboxes left after the quota test: %v", ids)
	}
}

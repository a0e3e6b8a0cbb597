package e2e

import "testing"

// TestVolumesE2B runs js/volumes.mjs with the npm `e2b` client's Volume
// against a daemon whose volumes are 64 MiB (--volume-size), so the file
// reaches ENOSPC quickly; E2B_VOLUME_API_URL points the SDK's content API
// at the daemon. The file removes its volumes: the data dir's mount check
// then sees none left.
func TestVolumesE2B(t *testing.T) {
	dir := jsDir(t)
	d := startDaemon(t, "--volume-size", "64")
	env := append(clientEnv(d), "E2B_VOLUME_API_URL="+d.URL)
	runNode(t, dir, env, "--test", "--test-concurrency=1", "--test-reporter=spec", "volumes.mjs")
	if ids := d.SandboxIDs(); len(ids) > 0 {
		t.Errorf("sandboxes left after the volumes test: %v", ids)
	}
}

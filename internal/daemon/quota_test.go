package daemon

import "testing"

func TestDefaultMaxSandboxes(t *testing.T) {
	for _, tc := range []struct {
		memMiB int64
		want   int
	}{
		{512, 1}, {2048, 1}, {4096, 16}, {8192, 48}, {24 * 1024, 176}, {64 * 1024, 496}, {256 * 1024, 1000},
	} {
		if got := defaultMaxSandboxes(tc.memMiB); got != tc.want {
			t.Errorf("defaultMaxSandboxes(%d MiB) = %d, want %d", tc.memMiB, got, tc.want)
		}
	}
	if n, err := maxSandboxes(0); err != nil || n < 1 || n > maxSandboxesCap {
		t.Errorf("maxSandboxes(0) on this host = %d, %v", n, err)
	}
	if n, err := maxSandboxes(7); err != nil || n != 7 {
		t.Errorf("maxSandboxes(7) = %d, %v", n, err)
	}
	if _, err := maxSandboxes(-1); err == nil {
		t.Error("maxSandboxes(-1) accepted")
	}
}

package agent

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// TestAfterEnd: a refill starts refillAfterEnd after the command ended, not
// at once (it would compete with sending the end), and after
// poolRefillDelay when the command runs on; never before the host's busy
// hint has passed.
func TestAfterEnd(t *testing.T) {
	tests := []struct {
		name  string
		endAt time.Duration // -1: never
		busy  time.Duration // the host's hint
		want  time.Duration
	}{
		{"ends at once", 0, 0, refillAfterEnd},
		{"ends after 30 ms", 30 * time.Millisecond, 0, 30*time.Millisecond + refillAfterEnd},
		{"runs on", -1, 0, poolRefillDelay},
		{"ends at once, host busy 500 ms", 0, 500 * time.Millisecond, 500 * time.Millisecond},
		{"runs on, host busy 2 s", -1, 2 * time.Second, 2 * time.Second},
		{"ends after 30 ms, host busy 5 ms", 30 * time.Millisecond, 5 * time.Millisecond, 30*time.Millisecond + refillAfterEnd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				done := make(chan struct{})
				if tt.endAt >= 0 {
					time.AfterFunc(tt.endAt, func() { close(done) })
				}
				var at time.Duration
				afterEnd(done, tt.busy, func() { at = time.Since(start) })
				if at != tt.want {
					t.Errorf("filled at %v, want %v", at, tt.want)
				}
			})
		})
	}
}

// TestHostBusy: the daemon's hint is read in milliseconds, bounded, and a
// missing or bad one is no hint.
func TestHostBusy(t *testing.T) {
	tests := []struct {
		value string
		want  time.Duration
	}{
		{"", 0},
		{"soon", 0},
		{"-40", 0},
		{"0", 0},
		{"250", 250 * time.Millisecond},
		{"86400000", 10 * time.Second},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.value != "" {
			h.Set("Forkbox-Host-Busy-Ms", tt.value)
		}
		if got := hostBusy(h); got != tt.want {
			t.Errorf("hostBusy(%q) = %v, want %v", tt.value, got, tt.want)
		}
	}
}

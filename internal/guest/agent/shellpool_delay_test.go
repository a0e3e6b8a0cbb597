package agent

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestAfterEnd: a refill starts refillAfterEnd after the command ended, not
// at once (it would compete with sending the end), and after
// poolRefillDelay when the command runs on.
func TestAfterEnd(t *testing.T) {
	tests := []struct {
		name  string
		endAt time.Duration // -1: never
		want  time.Duration
	}{
		{"ends at once", 0, refillAfterEnd},
		{"ends after 30 ms", 30 * time.Millisecond, 30*time.Millisecond + refillAfterEnd},
		{"runs on", -1, poolRefillDelay},
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
				afterEnd(done, func() { at = time.Since(start) })
				if at != tt.want {
					t.Errorf("filled at %v, want %v", at, tt.want)
				}
			})
		})
	}
}

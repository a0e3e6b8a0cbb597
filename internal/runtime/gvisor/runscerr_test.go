package gvisor

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// TestRunscErrorClasses: runsc's messages map to the error classes the API
// answers with, and a restore refused for moved host paths says so.
func TestRunscErrorClasses(t *testing.T) {
	exit := exec.Command("false").Run()
	var ee *exec.ExitError
	if !errors.As(exit, &ee) {
		t.Fatalf("false: %v", exit)
	}
	tests := []struct {
		stderr string
		class  error
		says   string
	}{
		{`container "x" does not exist`, errdefs.ErrNotFound, "does not exist"},
		{`container is not running`, errdefs.ErrConflict, "not running"},
		{`failed to handle restore spec validation: "dev.gvisor.spec.rootfs.source" does not match`, errdefs.ErrInternal, "copied or moved"},
		{`something else`, errdefs.ErrInternal, "exit 1"},
	}
	for _, tt := range tests {
		err := runscError(context.Background(), []string{"restore"}, ee, tt.stderr)
		if !errors.Is(err, tt.class) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%q: %v, want %v saying %q", tt.stderr, err, tt.class, tt.says)
		}
	}
}

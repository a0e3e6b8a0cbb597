package sandbox

import (
	"context"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

func TestCreateWithinLimits(t *testing.T) {
	lim := Limits{MaxCPUs: 2, MaxMemoryMB: 4096, MaxDiskMB: 10000}
	tests := []struct {
		name string
		req  CreateRequest
		want string // "" = accepted; else a part of the error
	}{
		{"defaults", CreateRequest{}, ""},
		{"at the limits", CreateRequest{CPUCount: 2, MemoryMB: 4096, DiskSizeMB: 10000}, ""},
		{"cpus", CreateRequest{CPUCount: 100000}, "--max-sandbox-cpus"},
		{"memory", CreateRequest{MemoryMB: 100000000}, "--max-sandbox-memory"},
		{"disk", CreateRequest{DiskSizeMB: 10001}, "--max-sandbox-disk"},
		{"negative", CreateRequest{MemoryMB: -1}, "memoryMB must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.m.cfg.Limits = lim
			tt.req.TemplateID = "base"
			sb, err := e.m.Create(context.Background(), tt.req)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				e.m.Kill(context.Background(), sb.ID)
				return
			}
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Create = %v; want ErrInvalidArgument naming %q", err, tt.want)
			}
			if ids := e.runtimeIDs(t); len(ids) != 0 {
				t.Fatalf("a refused create left %v", ids)
			}
		})
	}
}

func TestHostLimits(t *testing.T) {
	l, err := HostLimits(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if l.MaxCPUs < 1 || l.MaxMemoryMB < 64 || l.MaxDiskMB < 1 {
		t.Fatalf("HostLimits = %+v", l)
	}
}

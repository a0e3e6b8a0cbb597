package gvisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/netns"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/runtimetest"
)

const (
	testPort         = 49983
	testCgroupParent = "forkbox-test"
	testNSPrefix     = "fbg-"
)

// env is the state the tests of this package share: one network manager
// (one nftables table) and one runsc root, torn down by TestMain.
var env struct {
	once   sync.Once
	err    error
	runsc  string
	rootfs string
	state  string
	net    *netns.Manager
}

func TestMain(m *testing.M) {
	code := m.Run()
	teardown()
	os.Exit(code)
}

// setup prepares env once; a missing prerequisite fails the test.
func setup(t *testing.T) {
	t.Helper()
	env.once.Do(func() { env.err = setupOnce() })
	if env.err != nil {
		t.Fatalf("gvisor test prerequisites: %v", env.err)
	}
}

func setupOnce() error {
	if os.Geteuid() != 0 {
		return errors.New("must run as root")
	}
	env.runsc = os.Getenv("FORKBOX_RUNSC")
	if env.runsc == "" {
		env.runsc = runtimetest.FindRepoFile("bin/runsc")
	}
	if _, err := os.Stat(env.runsc); err != nil {
		return fmt.Errorf("runsc not found at %q (set FORKBOX_RUNSC or build bin/runsc: "+
			"CGO_ENABLED=0 go build -o bin/runsc gvisor.dev/gvisor/runsc): %v", env.runsc, err)
	}
	env.rootfs = os.Getenv("FORKBOX_ROOTFS")
	if env.rootfs == "" {
		env.rootfs = "/var/lib/forkbox/templates/base/rootfs"
		if _, err := os.Stat(env.rootfs + "/usr/bin/python3"); err != nil {
			env.rootfs = "/tmp/rootfs-test"
		}
	}
	if _, err := os.Stat(env.rootfs + "/usr/bin/python3"); err != nil {
		return fmt.Errorf("no rootfs with python3 at %q (set FORKBOX_ROOTFS): %v", env.rootfs, err)
	}
	state, err := os.MkdirTemp("", "forkbox-gvisor-test-")
	if err != nil {
		return err
	}
	env.state = state
	env.net, err = netns.New(context.Background(), netns.Config{
		Subnet:     netip.MustParsePrefix("10.203.0.0/16"),
		NamePrefix: testNSPrefix,
		LinkPrefix: "fbg",
		Table:      "forkbox_gvisor_test",
	})
	return err
}

// teardown removes everything the tests may have left.
func teardown() {
	ctx := context.Background()
	if env.state != "" {
		if r, err := newGvisor(); err == nil {
			if list, err := r.List(ctx); err == nil {
				for _, info := range list {
					r.Delete(ctx, info.ID)
				}
			}
		}
		unix.Unmount(filepath.Join(env.state, "runsc", "null-netns"), unix.MNT_DETACH)
		os.RemoveAll(env.state)
	}
	if env.net != nil {
		env.net.Close(ctx)
	}
	for _, c := range cgroupControllers {
		os.Remove(filepath.Join(cgroupRoot, c, testCgroupParent))
	}
}

func newGvisor() (*Runtime, error) {
	level := slog.LevelWarn
	if os.Getenv("FORKBOX_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return New(context.Background(), Config{
		RunscPath:    env.runsc,
		StateDir:     env.state,
		Net:          env.net,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		CgroupParent: testCgroupParent,
	})
}

func newRuntime(t *testing.T) runtime.Runtime {
	setup(t)
	r, err := newGvisor()
	if err != nil {
		t.Fatalf("gvisor.New: %v", err)
	}
	return r
}

// checkClean asserts that a gone sandbox left no namespace, cgroup, bundle
// or runsc container.
func checkClean(t *testing.T, id string) {
	t.Helper()
	paths := []string{
		"/var/run/netns/" + testNSPrefix + id,
		filepath.Join(env.state, "sandboxes", id),
		filepath.Join(env.state, "runsc", id+"_sandbox:"+id+".state"),
	}
	for _, c := range cgroupControllers {
		paths = append(paths, filepath.Join(cgroupRoot, c, testCgroupParent, id))
	}
	for _, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover of %s: %s (%v)", id, p, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(env.state, "runsc"))
	for _, e := range entries {
		if strings.Contains(e.Name(), id) {
			t.Errorf("leftover runsc state of %s: %s", id, e.Name())
		}
	}
	if _, ok := env.net.Get(id); ok {
		t.Errorf("leftover network lease of %s", id)
	}
}

func TestConformance(t *testing.T) {
	setup(t)
	runtimetest.Run(t, newRuntime, runtimetest.Options{
		RootFS:         env.rootfs,
		Args:           runtimetest.PythonServerArgs(testPort),
		Port:           testPort,
		FailArgs:       []string{"/nonexistent/binary"},
		CheckClean:     checkClean,
		KillSupervisor: killSentry,
	})
}

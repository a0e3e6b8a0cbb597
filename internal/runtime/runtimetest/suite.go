// Package runtimetest is the conformance suite every runtime.Runtime backend
// passes (the containerd snapshotter testsuite pattern): the backend's own
// test calls Run with a constructor and Options, and the same behaviour is
// checked for the in-memory fake and for gVisor.
package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
)

// Options tell the suite how to run sandboxes on a backend.
type Options struct {
	// RootFS is the template root filesystem of every spec.
	RootFS string
	// Args is a first process that serves the test server protocol (see
	// PythonServerArgs and Handler) on Port.
	Args []string
	// Port is where Args listens.
	Port int
	// FailArgs, if set, are first-process args Create must fail with (a
	// missing binary); the suite then checks nothing is left behind.
	FailArgs []string
	// StartTimeout bounds the wait for the first process to answer.
	// Default 30 s.
	StartTimeout time.Duration
	// CheckClean, if set, checks backend-specific leftovers (namespaces,
	// cgroups, files) of a sandbox that is gone.
	CheckClean func(t *testing.T, id string)
	// KillSupervisor kills sandbox id's supervisor from outside, as an
	// operator's kill -9 would. Required when the backend implements
	// runtime.Waiter.
	KillSupervisor func(t *testing.T, id string)
}

// suite carries one subtest's runtime and options.
type suite struct {
	t    *testing.T
	rt   runtime.Runtime
	opts Options
}

// Run runs the conformance suite. newRuntime is called once per subtest.
func Run(t *testing.T, newRuntime func(t *testing.T) runtime.Runtime, opts Options) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	tests := []struct {
		name string
		fn   func(s *suite)
	}{
		{"Lifecycle", testLifecycle},
		{"DuplicateCreate", testDuplicate},
		{"UnknownID", testUnknown},
		{"CreateFailure", testCreateFailure},
		{"Isolation", testIsolation},
		{"CloneLeaveRunning", testClone},
		{"CheckpointStopRestoreSameID", testStopRestore},
		{"ReplaceRunning", testReplace},
		{"FilesystemSave", testFilesystemSave},
		{"UpperLayer", testUpperLayer},
		{"WaitExit", testWait},
		{"WatchMemory", testWatchMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(&suite{t: t, rt: newRuntime(t), opts: opts})
		})
	}
}

// Spec returns a spec of the suite's server for id.
func (s *suite) spec(id string) runtime.Spec {
	return runtime.Spec{
		ID: id, RootFS: s.opts.RootFS, Args: s.opts.Args, Env: []string{"FORKBOX_TEST=1"},
		Hostname: "sbx", Resources: runtime.Resources{MemoryMB: 256, CPUCount: 1, PidsMax: 256},
	}
}

// create creates a sandbox that is deleted when the test ends and waits
// until its server answers; it returns the time from Create to the first
// answer.
func (s *suite) create(id string) (runtime.Info, time.Duration) {
	s.t.Helper()
	start := time.Now()
	info, err := s.rt.Create(context.Background(), s.spec(id))
	if err != nil {
		s.t.Fatalf("Create %s: %v", id, err)
	}
	s.deleteLater(id)
	s.waitReady(id)
	return info, time.Since(start)
}

// deleteLater deletes id at the end of the test if it still exists.
func (s *suite) deleteLater(id string) {
	s.t.Cleanup(func() {
		if err := s.rt.Delete(context.Background(), id); err != nil && !errdefs.IsNotFound(err) {
			s.t.Errorf("cleanup Delete %s: %v", id, err)
		}
	})
}

// waitReady polls /procs until the server answers.
func (s *suite) waitReady(id string) {
	s.t.Helper()
	deadline := time.Now().Add(s.opts.StartTimeout)
	for {
		_, err := s.get(id, "/procs")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("sandbox %s did not answer within %v: %v", id, s.opts.StartTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// get does one HTTP GET through Dial.
func (s *suite) get(id, path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return s.rt.Dial(ctx, id, s.opts.Port)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandbox"+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), nil
}

// mustGet is get that fails the test on error.
func (s *suite) mustGet(id, path string) string {
	s.t.Helper()
	body, err := s.get(id, path)
	if err != nil {
		s.t.Fatalf("GET %s from %s: %v", path, id, err)
	}
	return body
}

// wantState checks the backend's view of id.
func (s *suite) wantState(id string, want runtime.State) runtime.Info {
	s.t.Helper()
	info, err := s.rt.Info(context.Background(), id)
	if err != nil {
		s.t.Fatalf("Info %s: %v", id, err)
	}
	if info.State != want || info.ID != id {
		s.t.Fatalf("Info %s = %+v, want state %s", id, info, want)
	}
	return info
}

// wantGone checks that id is unknown and left nothing behind.
func (s *suite) wantGone(id string) {
	s.t.Helper()
	if _, err := s.rt.Info(context.Background(), id); !errors.Is(err, errdefs.ErrNotFound) {
		s.t.Fatalf("Info of gone %s: err = %v, want ErrNotFound", id, err)
	}
	list, err := s.rt.List(context.Background())
	if err != nil {
		s.t.Fatalf("List: %v", err)
	}
	if slices.ContainsFunc(list, func(i runtime.Info) bool { return i.ID == id }) {
		s.t.Fatalf("List still contains gone %s", id)
	}
	if s.opts.CheckClean != nil {
		s.opts.CheckClean(s.t, id)
	}
}

// checkpointer returns the backend's Checkpointer or fails the test.
func (s *suite) checkpointer() runtime.Checkpointer {
	s.t.Helper()
	cp, ok := s.rt.(runtime.Checkpointer)
	if !ok {
		s.t.Fatalf("%s does not implement runtime.Checkpointer", s.rt.Name())
	}
	return cp
}

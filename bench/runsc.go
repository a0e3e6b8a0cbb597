package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// rawRunsc drives the pinned runsc directly with its own --root, the way
// docs/runsc-recipes.md does: the floor forkbox is compared against.
type rawRunsc struct {
	bin, root, dir, rootfs string
	seq                    atomic.Int64
	// flags are more global runsc flags (-raw-flags), e.g. a floor for
	// forkbox's --restore-on-demand.
	flags []string
}

func (r *rawRunsc) global(extra ...string) []string {
	args := append([]string{"--root=" + r.root, "--platform=systrap", "--network=sandbox", "--overlay2=root:memory"}, r.flags...)
	return append(args, extra...)
}

// newID returns a fresh fixed-length (20 character) container id.
func (r *rawRunsc) newID() string {
	return fmt.Sprintf("rawbench%012d", r.seq.Add(1))
}

// run executes a short runsc command and returns its stdout. WaitDelay
// bounds the wait for pipes a sandbox child may have inherited (trap 1).
func (r *rawRunsc) run(ctx context.Context, timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, r.bin, r.global(args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("runsc %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// bundle writes the OCI bundle of container id running argv in net; it
// mirrors the spec forkbox's gVisor runtime builds for the base template
// (same mounts, caps and limits: 2 CPUs, 512 MiB + headroom = 768 MiB
// memory cgroup, pids 2176).
func (r *rawRunsc) bundle(id string, net rawNet, argv []string) (string, error) {
	dir := filepath.Join(r.dir, "bundles", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	mem, quota, period := int64(768<<20), int64(200000), uint64(100000)
	caps := []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
		"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
		"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}
	spec := specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Args: argv, Cwd: "/", Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Capabilities: &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps},
			Rlimits:      []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1 << 20, Soft: 1 << 20}},
		},
		Root:     &specs.Root{Path: r.rootfs},
		Hostname: "rawbench",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs"},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/fbbench/" + id,
			Resources: &specs.LinuxResources{
				Memory: &specs.LinuxMemory{Limit: &mem},
				CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
				Pids:   &specs.LinuxPids{Limit: 2*1024 + 128},
			},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.NetworkNamespace, Path: net.path()}, {Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace},
			},
		},
	}
	b, err := json.MarshalIndent(&spec, "", "  ")
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

// detached runs a runsc command whose stdio becomes the container's
// (create, restore): stdout and stderr are a pipe read by a lineStream,
// never to EOF (trap 1); pipes, not files, survive restore (trap 4).
func (r *rawRunsc) detached(ctx context.Context, args ...string) (*lineStream, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	ls := newLineStream(pr)
	cmd := exec.CommandContext(ctx, r.bin, r.global(args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, pw, pw
	err = cmd.Run()
	pw.Close() // the sandbox holds its own copy
	if err != nil {
		time.Sleep(50 * time.Millisecond)
		ls.Close()
		return nil, fmt.Errorf("runsc %s: %v: %s", args[0], err, ls.Text())
	}
	return ls, nil
}

func (r *rawRunsc) create(ctx context.Context, id, bundle string) (*lineStream, error) {
	return r.detached(ctx, "create", "--bundle="+bundle, id)
}

func (r *rawRunsc) restore(ctx context.Context, id, bundle, image string) (*lineStream, error) {
	return r.detached(ctx, "restore", "--detach", "--bundle="+bundle, "--image-path="+image, id)
}

func (r *rawRunsc) start(ctx context.Context, id string) error {
	_, err := r.run(ctx, time.Minute, "start", id)
	return err
}

// exec runs `runsc exec id argv…` and returns once it exited.
func (r *rawRunsc) exec(ctx context.Context, id string, argv ...string) (string, error) {
	out, err := r.run(ctx, time.Minute, append([]string{"exec", id}, argv...)...)
	return string(out), err
}

// echo is `runsc exec id echo hi`, checked.
func (r *rawRunsc) echo(ctx context.Context, id string) error {
	return r.echoWith(ctx, id, echoArgv)
}

// echoWith runs argv, which must print "hi", with `runsc exec`.
func (r *rawRunsc) echoWith(ctx context.Context, id string, argv []string) error {
	out, err := r.exec(ctx, id, argv...)
	if err == nil && !strings.Contains(out, "hi") {
		err = fmt.Errorf("runsc exec echo: got %q", out)
	}
	return err
}

func (r *rawRunsc) checkpoint(ctx context.Context, id, image string, leaveRunning bool) error {
	if err := os.MkdirAll(image, 0o700); err != nil {
		return err
	}
	args := []string{"checkpoint", "--image-path=" + image}
	if leaveRunning {
		args = append(args, "--leave-running")
	}
	_, err := r.run(ctx, 2*time.Minute, append(args, id)...)
	return err
}

// delete force-deletes id and removes its cgroups.
func (r *rawRunsc) delete(ctx context.Context, id string) {
	r.run(context.WithoutCancel(ctx), 30*time.Second, "delete", "--force", id)
	removeCgroups("/fbbench/" + id)
}

// removeRunscContainers force-deletes every container under root, then
// unmounts the null-netns bind mount runsc leaves in its --root (without
// this the temporary directory cannot be removed and the mount leaks).
func removeRunscContainers(ctx context.Context, bin, root string) {
	if _, err := os.Stat(root); err != nil {
		return
	}
	r := &rawRunsc{bin: bin, root: root}
	out, err := r.run(ctx, 30*time.Second, "list", "--quiet")
	if err == nil {
		for _, id := range strings.Fields(string(out)) {
			r.run(ctx, 30*time.Second, "delete", "--force", id)
		}
	}
	if err := syscall.Unmount(filepath.Join(root, "null-netns"), syscall.MNT_DETACH); err == nil {
		slog.Debug("unmounted runsc null-netns", "root", root)
	}
}

// removeCgroups removes a v1 cgroup path from every controller (missing is fine).
func removeCgroups(rel string) {
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		os.Remove(filepath.Join("/sys/fs/cgroup", e.Name(), rel))
	}
}

// lineStream reads a container's output lines as they arrive.
type lineStream struct {
	f      *os.File
	mu     sync.Mutex
	lines  []stampedLine
	notify chan struct{}
}

type stampedLine struct {
	at   time.Time
	text string
}

func newLineStream(f *os.File) *lineStream {
	ls := &lineStream{f: f, notify: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			ls.mu.Lock()
			ls.lines = append(ls.lines, stampedLine{time.Now(), sc.Text()})
			close(ls.notify)
			ls.notify = make(chan struct{})
			ls.mu.Unlock()
		}
	}()
	return ls
}

// waitFor waits for a line containing s and returns when it was read.
func (ls *lineStream) waitFor(ctx context.Context, s string) (time.Time, error) {
	for {
		ls.mu.Lock()
		for _, l := range ls.lines {
			if strings.Contains(l.text, s) {
				ls.mu.Unlock()
				return l.at, nil
			}
		}
		ch := ls.notify
		ls.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for %q in container output: %w (got %q)", s, ctx.Err(), ls.Text())
		}
	}
}

// Lines returns a copy of the lines read so far.
func (ls *lineStream) Lines() []stampedLine {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return append([]stampedLine(nil), ls.lines...)
}

func (ls *lineStream) Text() string {
	var b strings.Builder
	for _, l := range ls.Lines() {
		b.WriteString(l.text + "\n")
	}
	return strings.TrimSpace(b.String())
}

func (ls *lineStream) Close() { ls.f.Close() }

package build

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// agentBinary is the static agent `make build` made (FORKBOX_BIN).
func agentBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("FORKBOX_BIN")
	if bin == "" {
		t.Fatal("FORKBOX_BIN is not set: point it at the directory `make build` fills (make test sets it)")
	}
	p := filepath.Join(bin, "forkbox-agent")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// busyboxRoot is a rootfs with Debian's static busybox only: no libc, no
// bash, no sudo; /etc/passwd as given.
func busyboxRoot(t *testing.T, passwd, group string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"bin", "etc", "usr/local"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	body, err := os.ReadFile("/bin/busybox") // busybox-static, scripts/deps.sh
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin/busybox"), body, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range []string{"sh", "id", "ls", "stat", "cat"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"etc/passwd": passwd, "etc/group": group} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func chroot(t *testing.T, root string, args ...string) string {
	t.Helper()
	c := exec.Command(args[0], args[1:]...)
	c.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	c.Dir, c.Env = "/", []string{"PATH=/bin:/usr/bin:/usr/local/bin"}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("chroot %s %q: %v\n%s", root, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestPrepareBusybox(t *testing.T) {
	agent := agentBinary(t)
	tests := []struct {
		name, passwd, group string
		wantID              string
		created             bool
	}{
		{"no user", "root:x:0:0:root:/root:/bin/sh\n", "root:x:0:\n", "uid=1000(user) gid=1000(user) groups=1000(user)", true},
		{"uid 1000 taken", "root:x:0:0::/root:/bin/sh\ndebian:x:1000:1000::/home/debian:/bin/sh", "root:x:0:\ndebian:x:1000:\n",
			"uid=1001(user) gid=1001(user) groups=1001(user)", true},
		{"user exists", "root:x:0:0::/root:/bin/sh\nuser:x:1234:1234::/home/user:/bin/sh\n", "root:x:0:\nuser:x:1234:\n",
			"uid=1234(user) gid=1234(user) groups=1234(user)", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := busyboxRoot(t, tc.passwd, tc.group)
			p, err := Prepare(context.Background(), root, PrepareOptions{AgentPath: agent, ResolvConf: []byte("nameserver 10.0.0.1\n"), ShimBash: true})
			if err != nil {
				t.Fatal(err)
			}
			if p.UserCreated != tc.created || p.HasBash || p.HasSudo || (tc.created && p.Shell != "/bin/sh") {
				t.Errorf("prepared %+v", p)
			}
			if got := chroot(t, root, "/bin/id", "user"); got != tc.wantID {
				t.Errorf("id user = %q, want %q", got, tc.wantID)
			}
			// The static agent runs in an image without libc.
			if out, _ := exec.Command("chroot", root, "/usr/local/bin/forkbox-agent", "-h").CombinedOutput(); !strings.Contains(string(out), "-addr") {
				t.Errorf("agent -h in the image: %s", out)
			}
			// E2B clients' `/bin/bash -l -c` works through the shim.
			if got := chroot(t, root, "/bin/bash", "-l", "-c", "echo $((6*7))"); got != "42" {
				t.Errorf("bash shim said %q", got)
			}
			if tc.created {
				if got := chroot(t, root, "/bin/stat", "-c", "%u:%g %a", "/home/user"); got != tc.wantID[4:8]+":"+tc.wantID[4:8]+" 750" {
					t.Errorf("home: %s", got)
				}
			}
			if got := chroot(t, root, "/bin/cat", "/etc/resolv.conf"); got != "nameserver 10.0.0.1" {
				t.Errorf("resolv.conf: %q", got)
			}
		})
	}
}

// TestPrepareStaysInRoot: an image whose directories are absolute symlinks
// to host paths gets its files inside the rootfs or not at all.
func TestPrepareStaysInRoot(t *testing.T) {
	agent := agentBinary(t)
	host := t.TempDir()
	for _, d := range []string{"etc", "bin"} {
		if err := os.MkdirAll(filepath.Join(host, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(host, "etc/passwd"), []byte("host:x:0:0::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := busyboxRoot(t, "root:x:0:0::/root:/bin/sh\n", "root:x:0:\n")
	// usr/local/bin points at a host directory by absolute path.
	if err := os.Symlink(filepath.Join(host, "bin"), filepath.Join(root, "usr/local/bin")); err != nil {
		t.Fatal(err)
	}
	_, err := Prepare(context.Background(), root, PrepareOptions{AgentPath: agent, ResolvConf: []byte("")})
	if err == nil {
		t.Log("prepare succeeded: the agent must be inside the rootfs")
	}
	if ents, _ := os.ReadDir(filepath.Join(host, "bin")); len(ents) != 0 {
		t.Fatalf("prepare wrote into the host directory: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "etc/passwd")); string(b) != "host:x:0:0::/:/bin/sh\n" {
		t.Fatalf("the host passwd changed: %q", b)
	}
	// etc itself a symlink to the host's etc: the account files resolve
	// inside the rootfs (where it dangles), never to the host.
	root = busyboxRoot(t, "", "")
	os.RemoveAll(filepath.Join(root, "etc"))
	if err := os.Symlink(filepath.Join(host, "etc"), filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(context.Background(), root, PrepareOptions{AgentPath: agent, ResolvConf: []byte("")}); err == nil {
		t.Error("prepare through a dangling /etc symlink succeeded")
	}
	if b, _ := os.ReadFile(filepath.Join(host, "etc/passwd")); string(b) != "host:x:0:0::/:/bin/sh\n" {
		t.Fatalf("the host passwd changed: %q", b)
	}
}

// Package build turns container images into forkbox templates.
//
// Prepare is the first step of a build: it makes an unpacked image rootfs
// runnable as a forkbox sandbox — the agent installed, the account `user`
// that E2B clients run commands as (created when the image has none, as
// E2B does), the network files a sandbox needs — without ever writing
// outside the rootfs, however the image's symlinks point.
package build

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/template"
)

// UserName is the account E2B clients run commands as by default.
const UserName = "user"

// PrepareOptions configures Prepare.
type PrepareOptions struct {
	// AgentPath is the (static) forkbox-agent binary to install.
	AgentPath string
	// ResolvConf is written as /etc/resolv.conf (nil: the host's).
	ResolvConf []byte
	// ShimBash puts a /bin/bash that runs /bin/sh into images without bash,
	// because E2B clients start every command as `/bin/bash -l -c …`.
	ShimBash bool
}

// Prepared describes the rootfs after Prepare.
type Prepared struct {
	UserCreated bool   `json:"userCreated"`
	UID         int    `json:"uid"`
	GID         int    `json:"gid"`
	Shell       string `json:"shell"`   // the login shell of `user`
	HasBash     bool   `json:"hasBash"` // the image itself has /bin/bash
	HasSudo     bool   `json:"hasSudo"`
}

// Prepare installs the agent and the account `user` into rootfs. All
// reads resolve inside the rootfs and all writes go through oci.ApplyLayer.
func Prepare(ctx context.Context, rootfs string, opts PrepareOptions) (*Prepared, error) {
	agent, err := os.ReadFile(opts.AgentPath)
	if err != nil {
		return nil, fmt.Errorf("prepare: agent binary: %w", err)
	}
	resolv := opts.ResolvConf
	if resolv == nil {
		resolv, _ = os.ReadFile("/etc/resolv.conf")
	}
	r, err := openRoot(rootfs)
	if err != nil {
		return nil, err
	}
	defer r.close()
	p := &Prepared{HasBash: r.isFile("bin/bash"), HasSudo: r.isFile("usr/bin/sudo") || r.isFile("bin/sudo")}
	now := time.Now()
	l := &layer{now: now}
	if err := addUser(r, l, p); err != nil {
		return nil, err
	}
	l.file(trimSlash(template.AgentInRootFS), agent, 0o755, 0, 0)
	l.file("etc/resolv.conf", resolv, 0o644, 0, 0)
	l.file("etc/hosts", []byte("127.0.0.1 localhost forkbox\n::1 localhost\n"), 0o644, 0, 0)
	l.file("etc/hostname", []byte("forkbox\n"), 0o644, 0, 0)
	if !r.exists("tmp") {
		l.dir("tmp", 0o1777, 0, 0)
	}
	if p.HasSudo {
		l.file("etc/sudoers.d/"+UserName, []byte(UserName+" ALL=(ALL:ALL) NOPASSWD: ALL\n"), 0o440, 0, 0)
	}
	if !p.HasBash && opts.ShimBash && r.exists("bin/sh") {
		// A script, not a symlink: a multi-call busybox would look for
		// an applet named bash.
		l.file("bin/bash", []byte(bashShim), 0o755, 0, 0)
	}
	if _, err := oci.ApplyLayer(ctx, rootfs, bytes.NewReader(l.bytes()), oci.ApplyOptions{}); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	return p, nil
}

// bashShim stands in for bash in images that have none.
const bashShim = "#!/bin/sh\n# forkbox: this image has no bash; E2B clients run commands with /bin/bash.\nexec /bin/sh \"$@\"\n"

func trimSlash(p string) string { return strings.TrimPrefix(p, "/") }

// addUser adds `user` (and its group and home) to the layer unless the
// image has it, picking ids the image does not use yet.
func addUser(r *root, l *layer, p *Prepared) error {
	passwd, err := r.read("etc/passwd")
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("prepare: read /etc/passwd: %w", err)
	}
	if u, ok := findUser(passwd, UserName); ok {
		p.UID, p.GID, p.Shell = u.uid, u.gid, u.shell
		return nil
	}
	group, err := r.read("etc/group")
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("prepare: read /etc/group: %w", err)
	}
	p.UserCreated = true
	p.UID = freeID(idsOf(passwd, 2))
	p.GID = p.UID
	if used := idsOf(group, 2); used[p.GID] {
		p.GID = freeID(used)
	}
	p.Shell = "/bin/sh"
	if p.HasBash {
		p.Shell = "/bin/bash"
	}
	line := fmt.Sprintf("%s:x:%d:%d::/home/%s:%s\n", UserName, p.UID, p.GID, UserName, p.Shell)
	l.file("etc/passwd", appendLine(passwd, line), r.mode("etc/passwd", 0o644), 0, 0)
	l.file("etc/group", appendLine(group, fmt.Sprintf("%s:x:%d:\n", UserName, p.GID)), r.mode("etc/group", 0o644), 0, 0)
	if shadow, err := r.read("etc/shadow"); err == nil {
		st := r.stat("etc/shadow")
		l.file("etc/shadow", appendLine(shadow, UserName+":!::0:99999:7:::\n"), st.mode, st.uid, st.gid)
	}
	if !r.exists("home/" + UserName) {
		l.dir("home/"+UserName, 0o750, p.UID, p.GID)
	}
	return nil
}

type passwdEntry struct {
	uid, gid int
	shell    string
}

// findUser looks name up in passwd-format content.
func findUser(passwd []byte, name string) (passwdEntry, bool) {
	sc := bufio.NewScanner(bytes.NewReader(passwd))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 7 && f[0] == name {
			uid, _ := strconv.Atoi(f[2])
			gid, _ := strconv.Atoi(f[3])
			return passwdEntry{uid: uid, gid: gid, shell: f[6]}, true
		}
	}
	return passwdEntry{}, false
}

// idsOf collects the numeric field i of colon-separated lines.
func idsOf(content []byte, i int) map[int]bool {
	ids := map[int]bool{}
	sc := bufio.NewScanner(bytes.NewReader(content))
	for sc.Scan() {
		if f := strings.Split(sc.Text(), ":"); len(f) > i {
			if id, err := strconv.Atoi(f[i]); err == nil {
				ids[id] = true
			}
		}
	}
	return ids
}

// freeID is 1000 (E2B's uid of `user`) or the next id above it not used.
func freeID(used map[int]bool) int {
	id := 1000
	for used[id] {
		id++
	}
	return id
}

func appendLine(content []byte, line string) []byte {
	out := append([]byte{}, content...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, line...)
}

// layer builds the tar Prepare applies.
type layer struct {
	buf bytes.Buffer
	tw  *tar.Writer
	now time.Time
}

func (l *layer) add(h *tar.Header, body []byte) {
	if l.tw == nil {
		l.tw = tar.NewWriter(&l.buf)
	}
	h.ModTime, h.Format = l.now, tar.FormatPAX
	// Writes to a bytes.Buffer cannot fail.
	_ = l.tw.WriteHeader(h)
	_, _ = l.tw.Write(body)
}

func (l *layer) file(name string, body []byte, mode int64, uid, gid int) {
	l.add(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Uid: uid, Gid: gid, Size: int64(len(body))}, body)
}

func (l *layer) dir(name string, mode int64, uid, gid int) {
	l.add(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: mode, Uid: uid, Gid: gid}, nil)
}

func (l *layer) bytes() []byte {
	if l.tw == nil {
		l.tw = tar.NewWriter(&l.buf)
	}
	_ = l.tw.Close()
	return l.buf.Bytes()
}

// root reads inside a rootfs, resolving every path with the rootfs as "/".
type root struct{ fd int }

func openRoot(path string) (*root, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("prepare: open rootfs %s: %v: %w", path, err, errdefs.ErrNotFound)
	}
	return &root{fd: fd}, nil
}

func (r *root) close() { unix.Close(r.fd) }

func (r *root) open(p string, flags uint64) (*os.File, error) {
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
	fd, err := unix.Openat2(r.fd, p, &how)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// read returns the content of p (at most 16 MiB: account files are small).
func (r *root) read(p string) ([]byte, error) {
	f, err := r.open(p, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 16<<20))
}

type nodeStat struct {
	mode     int64
	uid, gid int
	regular  bool
}

func (r *root) stat(p string) nodeStat {
	f, err := r.open(p, unix.O_PATH)
	if err != nil {
		return nodeStat{}
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return nodeStat{}
	}
	return nodeStat{mode: int64(st.Mode & 0o7777), uid: int(st.Uid), gid: int(st.Gid),
		regular: st.Mode&unix.S_IFMT == unix.S_IFREG}
}

// mode is p's permission bits, or def when p does not exist.
func (r *root) mode(p string, def int64) int64 {
	if st := r.stat(p); st.mode != 0 {
		return st.mode
	}
	return def
}

func (r *root) exists(p string) bool {
	f, err := r.open(p, unix.O_PATH)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// isFile reports whether p resolves (inside the rootfs) to a regular file.
func (r *root) isFile(p string) bool { return r.stat(p).regular }

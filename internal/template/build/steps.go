package build

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/template/dockerfile"
)

// e2bBase is the image name E2B's SDK sends for a template without from…:
// forkbox's own base template stands in for it, so no registry is needed.
const e2bBase = "e2bdev/base"

func (j *job) base(ctx context.Context) error {
	img := j.spec.FromImage
	if j.spec.FromTemplate != "" || img == "" || img == e2bBase || strings.HasPrefix(img, e2bBase+":") {
		return j.baseTemplate(ctx, j.spec.FromTemplate)
	}
	return j.baseImage(ctx, img)
}

// baseTemplate starts from an existing template's files and settings.
func (j *job) baseTemplate(ctx context.Context, ref string) error {
	if ref == "" {
		ref = j.s.cfg.BaseTemplate
	}
	j.logf("info", "FROM template %s", ref)
	if r, err := j.s.Get(ctx, ref); err == nil && r.Meta != nil {
		m := r.Meta
		j.user, j.workdir = m.User, m.Workdir
		for k, v := range m.Env {
			j.setEnv(k, v)
		}
		if m.Layer == "" || !j.useLayer(ctx, m.Layer) {
			return fmt.Errorf("template %s has lost its root filesystem (layer %s): %w", ref, short(m.Layer), errdefs.ErrNotFound)
		}
		j.key = j.hashKey("template", m.Layer)
		return nil
	}
	t, err := j.s.cfg.Store.GetTemplate(ctx, ref)
	if err != nil {
		return fmt.Errorf("base template %q: %w", ref, err)
	}
	if t.Kind != store.KindTemplate {
		return fmt.Errorf("%s is a snapshot, not a template: %w", ref, errdefs.ErrInvalidArgument)
	}
	j.user, j.workdir = UserName, "/home/"+UserName
	if err := j.importTemplate(ctx, t); err != nil {
		return err
	}
	j.key = j.hashKey("template", t.ID, t.Version, t.RootFS)
	return nil
}

// baseImage pulls an image and makes its rootfs a base layer (agent and
// user `user` put in by Prepare).
func (j *job) baseImage(ctx context.Context, ref string) error {
	j.logf("info", "FROM %s: pulling", ref)
	po := oci.PullOptions{Progress: func(p oci.Progress) {
		if p.Done == p.Total {
			how := fmt.Sprintf("downloaded %.1f MiB", float64(p.Total)/(1<<20))
			if p.Cached {
				how = "cached"
			}
			j.logf("info", "layer %d %s: %s", p.Index+1, short(p.Layer), how)
		}
	}}
	if reg := j.spec.FromImageRegistry; reg != nil && reg.Username != "" {
		po.Auth = &oci.Auth{Username: reg.Username, Password: reg.Password}
	}
	img, err := j.s.cfg.Images.Pull(ctx, ref, po)
	if err != nil {
		return err
	}
	defer j.s.cfg.Images.Release(img) // its blobs are a cache once unpacked
	j.logf("info", "pulled %s (%d layers, %.1f MiB)", img.Source, len(img.Layers), float64(img.Size())/(1<<20))
	agent, err := images.HashFile(j.s.cfg.AgentPath)
	if err != nil {
		return err
	}
	j.key = j.hashKey("image", img.Digest, agent)
	j.applyConfig(img.Config)
	base := j.key
	if j.useLayer(ctx, base) {
		j.logf("info", "CACHED image rootfs")
		return nil
	}
	if err := j.unpackImage(ctx, img); err != nil {
		return err
	}
	scratch, copied, err := j.copyLayer()
	if err != nil {
		return err
	}
	p, err := Prepare(ctx, filepath.Join(j.work, scratch), PrepareOptions{AgentPath: j.s.cfg.AgentPath, ShimBash: true})
	if err != nil {
		return err
	}
	if p.UserCreated {
		j.logf("info", "created user %s (uid %d)", UserName, p.UID)
	}
	return j.commitLayer(ctx, filepath.Join(j.work, scratch), base, copied)
}

// applyConfig takes the image's Env, WorkingDir and User as the build's
// starting state.
func (j *job) applyConfig(c oci.Config) {
	for _, kv := range c.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			j.setEnv(k, v)
		}
	}
	j.workdir, j.user = c.WorkingDir, c.User
	if j.workdir == "" {
		j.workdir = "/"
	}
	if u, _, _ := strings.Cut(j.user, ":"); u != "" {
		j.user = u
	} else {
		j.user = "root"
	}
	if j.spec.StartCmd == "" {
		if cmd := c.StartCommand(); len(cmd) > 0 && !isShell(cmd) {
			j.spec.StartCmd = shellJoin(cmd)
		}
	}
}

// isShell reports an image's default command that is only an interactive
// shell: no service to start.
func isShell(cmd []string) bool {
	if len(cmd) != 1 {
		return false
	}
	switch filepath.Base(cmd[0]) {
	case "sh", "bash", "ash", "dash", "zsh":
		return true
	}
	return false
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func short(digest string) string {
	_, hex, _ := strings.Cut(digest, ":")
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return hex
}

// account is a user of a rootfs.
type account struct {
	uid, gid int
	home     string
}

// lookupUser finds a user by name or numeric uid in rootfs/etc/passwd.
func lookupUser(rootfs, user string) (account, bool) {
	f, err := os.Open(filepath.Join(rootfs, "etc/passwd"))
	if err != nil {
		return account{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), ":")
		if len(p) < 6 || (p[0] != user && p[2] != user) {
			continue
		}
		uid, err1 := strconv.Atoi(p[2])
		gid, err2 := strconv.Atoi(p[3])
		if err1 != nil || err2 != nil {
			continue
		}
		return account{uid: uid, gid: gid, home: p[5]}, true
	}
	return account{}, false
}

// classed is an error whose message is exactly msg (E2B's words, which
// SDK users match on) and whose class is class.
type classed struct {
	msg   string
	class error
}

func (e *classed) Error() string { return e.msg }
func (e *classed) Unwrap() error { return e.class }

func invalidUser(cmd, user string) error {
	return &classed{fmt.Sprintf("failed to run command '%s': command failed: unauthenticated: invalid username: '%s'", cmd, user), errdefs.ErrInvalidArgument}
}

// runScript runs in the build sandbox as root: the layer at /mnt/$1 gets
// /proc, /dev and the host's CA bundle (caScript), and the step's command
// runs chrooted into it as user $2 (uid:gid) in directory $3 with bash -l
// -c, as E2B runs steps.
const runScript = `R="/mnt/$1"; U="$2"; WD="$3"; CMD="$4"
# $PATH is the image's, for the step; this script's tools are the build
# sandbox's own.
IPATH="${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}"
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CH=$(command -v chroot)
m=""
if [ -d "$R/proc" ] && mount -t proc proc "$R/proc"; then m="$R/proc"; fi
if [ -d "$R/dev" ] && mount --rbind /dev "$R/dev"; then m="$m $R/dev"; fi
` + caScript + `[ -d "$R$WD" ] || PATH="$IPATH" "$CH" "$R" /bin/sh -c 'mkdir -p "$1" && chown "$2" "$1"' sh "$WD" "$U"
SH=/bin/bash; [ -x "$R/bin/bash" ] || SH=/bin/sh
PATH="$IPATH" "$CH" --userspec="$U" "$R" /bin/sh -c 'cd "$1" || exit 1; exec "$2" -l -c "$3"' sh "$WD" "$SH" "$CMD"
rc=$?
for d in $m; do umount -l "$d"; done
exit $rc`

// run1 runs a RUN step in the layer scratch (a directory of j.work).
func (j *job) run1(ctx context.Context, scratch string, st dockerfile.Step) error {
	cmd, user := st.Args[0], j.user
	if len(st.Args) > 1 && st.Args[1] != "" {
		user = st.Args[1]
	}
	acct, ok := lookupUser(filepath.Join(j.work, scratch), user)
	if !ok {
		return invalidUser(cmd, user)
	}
	if err := j.ensureBox(ctx); err != nil {
		return err
	}
	env := map[string]string{"HOME": acct.home, "USER": user, "LOGNAME": user}
	for k, v := range j.env {
		env[k] = v
	}
	wd := j.workdir
	if wd == "" {
		wd = "/"
	}
	code, err := j.box.exec(ctx, client.ExecOptions{
		Cmd:  []string{"/bin/sh", "-c", runScript, "sh", scratch, fmt.Sprintf("%d:%d", acct.uid, acct.gid), wd, cmd},
		User: "root", Env: env,
	}, func(line string) { j.logf("info", "%s", line) })
	if err != nil {
		return fmt.Errorf("failed to run command '%s': %w", cmd, err)
	}
	if code != 0 {
		return fmt.Errorf("failed to run command '%s': command failed: exit status %d", cmd, code)
	}
	return nil
}

// ensureBox starts the build sandbox on first use: forkbox's base template
// with the build's work directory bound at /mnt.
func (j *job) ensureBox(ctx context.Context) error {
	if j.box != nil {
		return nil
	}
	base, err := j.s.cfg.Store.GetTemplate(ctx, j.s.cfg.BaseTemplate)
	if err != nil {
		return fmt.Errorf("build sandbox template: %w", err)
	}
	if err := j.stageHostCA(); err != nil {
		return fmt.Errorf("stage the host's CA bundle: %w", err)
	}
	cpu, mem := j.limits()
	j.box, err = startBox(ctx, j.s.cfg.Runtime, runtime.Spec{
		RootFS: base.RootFS, Args: j.s.cfg.AgentArgs, Admin: true,
		Mounts:    []runtime.Mount{{Source: j.work, Destination: "/mnt"}},
		Resources: runtime.Resources{CPUCount: cpu, MemoryMB: mem},
	}, map[string]any{"defaultUser": "root"})
	return err
}

// limits are the template's CPU and memory (defaults 2 and 1024 MiB).
func (j *job) limits() (int, int) {
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	cpu, mem := 2, 1024
	if r := j.s.records[j.tplID]; r != nil {
		if r.CPUCount > 0 {
			cpu = r.CPUCount
		}
		if r.MemoryMB > 0 {
			mem = r.MemoryMB
		}
	}
	return cpu, mem
}

// copy1 copies an uploaded context into the layer at rootfs.
func (j *job) copy1(ctx context.Context, rootfs string, st dockerfile.Step) error {
	if len(st.Args) < 2 {
		return fmt.Errorf("COPY needs a source and a destination: %w", errdefs.ErrInvalidArgument)
	}
	if !j.s.cfg.Uploads.Has(j.tplID, st.FilesHash) {
		return fmt.Errorf("the files of COPY %s (filesHash %q) were not uploaded: %w", st.Args[0], st.FilesHash, errdefs.ErrInvalidArgument)
	}
	upload, _ := j.s.cfg.Uploads.Path(j.tplID, st.FilesHash)
	dest := st.Args[1]
	if !strings.HasPrefix(dest, "/") {
		dest = resolveDir(j.workdir, dest)
		if strings.HasSuffix(st.Args[1], "/") {
			dest += "/"
		}
	}
	user := j.user
	if len(st.Args) > 2 && st.Args[2] != "" {
		user = st.Args[2]
	}
	acct, ok := lookupUser(rootfs, user)
	if !ok {
		return fmt.Errorf("COPY %s: unknown user %q: %w", st.Args[0], user, errdefs.ErrInvalidArgument)
	}
	spec := CopySpec{Src: st.Args[0], Dest: dest, UID: acct.uid, GID: acct.gid}
	if len(st.Args) > 3 && st.Args[3] != "" {
		mode, err := strconv.ParseInt(st.Args[3], 8, 32)
		if err != nil {
			return fmt.Errorf("COPY mode %q: %w", st.Args[3], errdefs.ErrInvalidArgument)
		}
		spec.Mode = mode
	}
	return CopyInto(ctx, rootfs, upload, spec)
}

package daemonproc

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxStacked bounds UnmountUnder's detaches of one mount point.
const maxStacked = 64

// MountsUnder lists the mount points at or below dir, deepest first, as
// this process sees them in /proc/self/mountinfo (a point mounted twice is
// listed twice). nil if mountinfo cannot be read.
func MountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	return mountsIn(string(b), dir)
}

// mountsIn is MountsUnder over the text of a mountinfo file.
func mountsIn(mountinfo, dir string) []string {
	dir = strings.TrimSuffix(dir, "/")
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescape(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	// A path sorts after its parent, so the reverse order is deepest first.
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// unescape undoes mountinfo's octal escapes (\040 for a space, \011, \012,
// \134).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// UnmountUnder lazily unmounts (MNT_DETACH) everything mounted at or below
// dir, deepest first, each point until nothing is mounted there any more,
// so dir can be removed.
func UnmountUnder(dir string) {
	for _, m := range MountsUnder(dir) {
		for range maxStacked {
			if unix.Unmount(m, unix.MNT_DETACH) != nil {
				break
			}
		}
	}
}

// detachBelow lazily unmounts each mount point strictly below dir once
// (Proc.Stop's cleanup; see there).
func detachBelow(dir string) {
	for _, m := range MountsUnder(dir) {
		if m != strings.TrimSuffix(dir, "/") {
			unix.Unmount(m, unix.MNT_DETACH)
		}
	}
}

package agent

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// asAccount runs fn with acct's file-system rights, so every path the
// files API and the filesystem service touch is checked by the kernel (in a
// sandbox, gVisor's sentry) exactly as for a process of that user: each
// directory searched, each symlink followed, the final open, create,
// rename or unlink — nothing is decided by comparing strings.
//
// fn runs on an OS thread of its own whose effective uid, gid and
// supplementary groups are acct's. Credentials are per thread in Linux and
// in gVisor; the raw setgroups/setresgid/setresuid syscalls change only the
// calling thread (libc's wrappers and Go's syscall.Setresuid broadcast to
// every thread, which would de-root the whole agent). setfsuid/setfsgid,
// the classic tool for this, fail with ENOSYS in gVisor (measured with the
// pinned runsc), so the effective ids are switched. Leaving effective uid 0
// clears the thread's effective capabilities, so CAP_DAC_OVERRIDE no longer
// bypasses permission bits. The thread is never handed back to the Go
// scheduler: its goroutine exits while still locked to it, which makes the
// runtime end the thread rather than reuse it.
//
// Root (and an agent that is not root itself, as in unprivileged tests) runs
// fn directly.
func asAccount(acct *account, fn func() error) error {
	if acct == nil || acct.UID == 0 || os.Geteuid() != 0 {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		defer func() {
			if p := recover(); p != nil {
				errc <- fmt.Errorf("file operation as %s panicked: %v", acct.Name, p)
			}
		}()
		if err := becomeAccount(acct); err != nil {
			errc <- fmt.Errorf("switching to user %s: %w", acct.Name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// becomeAccount switches the calling thread's groups, effective gid and
// effective uid to acct's, in that order (the first two need root). The
// real and saved ids stay 0 so the rest of the agent can still signal the
// thread (Go's preemption does).
func becomeAccount(acct *account) error {
	groups := acct.Groups
	if len(groups) == 0 {
		groups = []uint32{acct.GID}
	}
	// gid_t is 32 bits wide for SYS_SETGROUPS on amd64 and arm64.
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&groups[0])), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	keep := ^uintptr(0) // -1: leave this id unchanged
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, keep, uintptr(acct.GID), keep); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, keep, uintptr(acct.UID), keep); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	return nil
}

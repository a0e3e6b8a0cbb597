// Package testnet serialises the tests that build an "outside world" on
// TEST-NET-2 (198.51.100.0/24): each routes that one range through a veth
// of its own, so two of them at once — test packages run as parallel
// processes, or a second test run on a shared machine — would route it
// twice and send each other's traffic astray.
package testnet

import (
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lockPath is host-wide on purpose: the routes it guards are.
const lockPath = "/run/forkbox-test-net-2.lock"

// wait bounds how long a test waits for another's outside world.
const wait = 15 * time.Minute

// Lock holds the host-wide TEST-NET-2 lock until t's cleanup. Call it before
// creating namespaces or routes (and before registering their cleanup, so
// they are removed before the lock is let go).
func Lock(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("TEST-NET-2 lock: %v", err)
	}
	if err := flockWithin(f, wait); err != nil {
		f.Close()
		t.Fatalf("TEST-NET-2 lock %s: %v", lockPath, err)
	}
	t.Cleanup(func() { f.Close() }) // closing drops the lock
}

// flockWithin takes an exclusive flock on f, polling so a stuck holder
// fails the test instead of hanging it.
func flockWithin(f *os.File, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if err != unix.EWOULDBLOCK {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("held by another test for %v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

package daemontest

import "testing"

// Each reservation is an index nobody else holds, the process's own
// included, and is free again once its test ends.
func TestReserveIndex(t *testing.T) {
	own := NetworkIndex()
	var a, b int
	t.Run("hold", func(t *testing.T) {
		a, b = ReserveIndex(t), ReserveIndex(t)
		for _, n := range []int{a, b} {
			if n < firstIndex || n > lastIndex || n == own {
				t.Fatalf("reserved %d (own %d), want another index in %d..%d", n, own, firstIndex, lastIndex)
			}
			if f := tryLock(n); f != nil {
				f.Close()
				t.Errorf("index %d could be locked again while reserved", n)
			}
		}
		if a == b {
			t.Fatalf("two reservations got index %d", a)
		}
		if f := tryLock(own); f != nil {
			f.Close()
			t.Errorf("the process's own index %d could be locked again", own)
		}
	})
	for _, n := range []int{a, b} {
		f := tryLock(n)
		if f == nil {
			t.Errorf("index %d still held after its test ended", n)
			continue
		}
		f.Close()
	}
}

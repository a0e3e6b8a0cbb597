package netns

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

func TestPool(t *testing.T) {
	type step struct {
		op   string // get, put, claim
		id   string
		slot int // expected slot for get; argument for put and claim
		err  error
	}
	tests := []struct {
		name  string
		size  int
		steps []step
	}{
		{"sequential", 3, []step{
			{op: "get", id: "a", slot: 1}, {op: "get", id: "b", slot: 2}, {op: "get", id: "c", slot: 3},
			{op: "get", id: "d", err: errdefs.ErrResourceExhausted},
		}},
		{"released slot is not reused at once", 3, []step{
			{op: "get", id: "a", slot: 1}, {op: "put", slot: 1}, {op: "get", id: "b", slot: 2},
			{op: "get", id: "c", slot: 3}, {op: "get", id: "d", slot: 1},
		}},
		{"wraps around", 2, []step{
			{op: "get", id: "a", slot: 1}, {op: "get", id: "b", slot: 2}, {op: "put", slot: 1},
			{op: "get", id: "c", slot: 1}, {op: "get", id: "d", err: errdefs.ErrResourceExhausted},
		}},
		{"claim then get skips claimed", 3, []step{
			{op: "claim", id: "x", slot: 1}, {op: "claim", id: "y", slot: 2}, {op: "get", id: "a", slot: 3},
		}},
		{"claim conflicts", 3, []step{
			{op: "claim", id: "x", slot: 2}, {op: "claim", id: "x", slot: 2},
			{op: "claim", id: "y", slot: 2, err: errdefs.ErrConflict},
		}},
		{"claim out of range", 3, []step{
			{op: "claim", id: "x", slot: 0, err: errdefs.ErrInvalidArgument},
			{op: "claim", id: "x", slot: 4, err: errdefs.ErrInvalidArgument},
		}},
		{"put of free slot is harmless", 2, []step{
			{op: "put", slot: 2}, {op: "get", id: "a", slot: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(tt.size)
			for i, s := range tt.steps {
				var err error
				switch s.op {
				case "get":
					var got int
					got, err = p.get(s.id)
					if err == nil && got != s.slot {
						t.Fatalf("step %d: get = %d, want %d", i, got, s.slot)
					}
				case "put":
					p.put(s.slot)
				case "claim":
					err = p.claim(s.slot, s.id)
				}
				if !errors.Is(err, s.err) && !(err == nil && s.err == nil) {
					t.Fatalf("step %d (%s): err = %v, want %v", i, s.op, err, s.err)
				}
			}
		})
	}
}

func TestSlotOfAndAlias(t *testing.T) {
	m := &Manager{cfg: Config{}}
	if err := m.cfg.setDefaults(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		slot int
		ok   bool
	}{
		{"fbh1", 1, true}, {"fbh254", 254, true}, {"fbh16382", 16382, true}, {"fbh16383", 0, false}, {"fbh0", 0, false},
		{"fbh01", 0, false}, {"fbhx", 0, false}, {"eth0", 0, false}, {"fbh", 0, false},
	}
	for _, tt := range tests {
		slot, ok := m.slotOf(tt.name)
		if slot != tt.slot || ok != tt.ok {
			t.Errorf("slotOf(%q) = %d, %v; want %d, %v", tt.name, slot, ok, tt.slot, tt.ok)
		}
	}
	for _, tt := range []struct {
		slot       int
		host, addr string
	}{{1, "10.201.0.5", "10.201.0.6"}, {63, "10.201.0.253", "10.201.0.254"}, {64, "10.201.1.1", "10.201.1.2"},
		{MaxSlots, "10.201.255.249", "10.201.255.250"}} {
		l := m.lease("abc", tt.slot, true)
		if l.HostAddr.String() != tt.host || l.Addr.String() != tt.addr || l.Bits != 30 {
			t.Errorf("lease(%d) = %s, %s/%d; want %s, %s/30", tt.slot, l.HostAddr, l.Addr, l.Bits, tt.host, tt.addr)
		}
		// The egress proxy finds a connection's sandbox by its source.
		if got := slotOfAddr(l.Addr); got != tt.slot {
			t.Errorf("slotOfAddr(%s) = %d, want %d", l.Addr, got, tt.slot)
		}
	}
	l := m.lease("abc", 7, true)
	if l.HostLink != "fbh7" {
		t.Fatalf("lease = %+v", l)
	}
	back, ok := m.parseAlias(alias(l), 7)
	if !ok || !reflect.DeepEqual(back, l) {
		t.Fatalf("parseAlias(alias(l)) = %+v, %v; want %+v", back, ok, l)
	}
	for _, bad := range []string{"", "abc", "abc:maybe", ":inet"} {
		if _, ok := m.parseAlias(bad, 7); ok {
			t.Errorf("parseAlias(%q) accepted", bad)
		}
	}
}

func TestReadResolvers(t *testing.T) {
	path := t.TempDir() + "/resolv.conf"
	writeFile(t, path, "# c\nnameserver 10.255.255.53\nnameserver ::1\nsearch x\nnameserver 1.1.1.1\n")
	got := readResolvers(path)
	if len(got) != 2 || got[0].String() != "10.255.255.53" || got[1].String() != "1.1.1.1" {
		t.Fatalf("readResolvers = %v", got)
	}
	if got := readResolvers(path + ".missing"); got != nil {
		t.Fatalf("missing file: %v", got)
	}
}

// TestLeaseByAddr: the egress proxy finds the lease of a connection by its
// source address, for slots across the whole /16.
func TestLeaseByAddr(t *testing.T) {
	m := &Manager{cfg: Config{}, leases: map[string]Lease{}}
	if err := m.cfg.setDefaults(); err != nil {
		t.Fatal(err)
	}
	m.pool = newPool(MaxSlots)
	for _, slot := range []int{1, 63, 64, 300, MaxSlots} {
		id := fmt.Sprintf("sb%d", slot)
		l := m.lease(id, slot, true)
		m.pool.used[slot], m.leases[id] = id, l
	}
	for _, slot := range []int{1, 63, 64, 300, MaxSlots} {
		want := m.leases[fmt.Sprintf("sb%d", slot)]
		if got, ok := m.LeaseByAddr(want.Addr); !ok || got.ID != want.ID {
			t.Errorf("LeaseByAddr(%s) = %q, %v; want %q", want.Addr, got.ID, ok, want.ID)
		}
		if _, ok := m.LeaseByAddr(want.HostAddr); ok {
			t.Errorf("LeaseByAddr(%s), a host side, found a lease", want.HostAddr)
		}
	}
}

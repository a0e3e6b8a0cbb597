package stack_test

import (
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// dispatchingEndpoint detaches the way fdbased does when a packet is being
// delivered at that moment: Attach(nil) waits for its dispatcher, and the
// dispatcher, in IPv4's HandlePacket, asks the stack for the NIC's name.
type dispatchingEndpoint struct {
	*channel.Endpoint
	s *stack.Stack
}

func (e *dispatchingEndpoint) Attach(d stack.NetworkDispatcher) {
	if d == nil {
		delivered := make(chan struct{})
		go func() {
			e.s.FindNICNameFromID(1)
			close(delivered)
		}()
		<-delivered
	}
	e.Endpoint.Attach(d)
}

func newDispatchingStack(t *testing.T) *stack.Stack {
	s := stack.New(stack.Options{NetworkProtocols: []stack.NetworkProtocolFactory{ipv4.NewProtocol}})
	ep := &dispatchingEndpoint{Endpoint: channel.New(16, 1500, ""), s: s}
	if err := s.CreateNIC(1, ep); err != nil {
		t.Fatalf("CreateNIC: %v", err)
	}
	return s
}

// finishes fails the test if f does not return within a few seconds: the
// deadlock this guards against never returns.
func finishes(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the link's detach waited for a dispatcher that waits for the stack's lock (forkbox patch 0002)", what)
	}
}

// TestForkboxDetachOutsideStackLock: removing a NIC (by hand, and in the
// checkpoint's beforeSave) detaches its link only after releasing Stack.mu.
func TestForkboxDetachOutsideStackLock(t *testing.T) {
	finishes(t, "RemoveNIC", func() {
		if err := newDispatchingStack(t).RemoveNIC(1); err != nil {
			t.Errorf("RemoveNIC: %v", err)
		}
	})
	finishes(t, "beforeSave", func() {
		s := newDispatchingStack(t)
		s.SetRemoveConf(true)
		s.BeforeSaveForTest()
		if s.HasNIC(1) {
			t.Error("NIC 1 still there after beforeSave")
		}
	})
	finishes(t, "Destroy", func() { newDispatchingStack(t).Destroy() })
}

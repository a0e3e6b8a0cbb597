package sandbox

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/forkbox/forkbox/internal/store"
)

// failingRecords makes PutSandbox fail for records in one state.
type failingRecords struct {
	records
	failState atomic.Value // State; "" fails nothing
}

var errInjected = errors.New("injected store failure")

func (f *failingRecords) PutSandbox(ctx context.Context, sb *store.Sandbox) error {
	if s, _ := f.failState.Load().(State); s != "" && State(sb.State) == s {
		return errInjected
	}
	return f.records.PutSandbox(ctx, sb)
}

// TestStoreWriteErrorsSurface: a failed store write when an operation
// claims a sandbox or ends its claim is the operation's error, not only a
// log line; a failed claim leaves the sandbox as it was.
func TestStoreWriteErrorsSurface(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	fr := &failingRecords{records: e.m.st}
	e.m.st = fr
	sb := e.create(t, CreateRequest{})

	fr.failState.Store(StateKilling) // the claim's write
	if err := e.m.Kill(ctx, sb.ID); !errors.Is(err, errInjected) {
		t.Fatalf("kill with a failing claim write: %v", err)
	}
	if got, err := e.m.Get(ctx, sb.ID); err != nil || got.State != StateRunning {
		t.Fatalf("after a failed claim: %+v %v; want running", got, err)
	}
	if n := e.count(t, sb.ID); n != 1 {
		t.Errorf("count = %d after a failed claim, want 1", n)
	}

	fr.failState.Store(StateKilled) // the release's write
	if err := e.m.Kill(ctx, sb.ID); !errors.Is(err, errInjected) {
		t.Fatalf("kill with a failing release write: %v", err)
	}
	if _, err := e.m.Get(ctx, sb.ID); err == nil {
		t.Error("killed sandbox still live in memory")
	}

	fr.failState.Store(StateRunning) // create's final write
	if _, err := e.m.Create(ctx, CreateRequest{TemplateID: "base"}); !errors.Is(err, errInjected) {
		t.Fatalf("create with a failing release write: %v", err)
	}
	if ids := e.runtimeIDs(t); len(ids) != 0 {
		t.Errorf("a create whose record failed left %v running", ids)
	}
	fr.failState.Store(State(""))
}

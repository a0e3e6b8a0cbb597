package cleanup

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestRunIsLIFOAndIgnoresCancel(t *testing.T) {
	var order []int
	var s Stack
	for i := 1; i <= 3; i++ {
		s.Add("step", func(ctx context.Context) error {
			if ctx.Err() != nil {
				t.Errorf("cleanup step saw a cancelled context")
			}
			order = append(order, i)
			return errors.New("logged, not returned")
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Run(ctx)
	if !slices.Equal(order, []int{3, 2, 1}) {
		t.Fatalf("order = %v", order)
	}
	if s.Len() != 0 {
		t.Fatalf("Run left %d steps", s.Len())
	}
	s.Add("never", func(context.Context) error { t.Error("disarmed step ran"); return nil })
	s.Disarm()
	s.Run(ctx)
}

func TestOnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"success disarms", nil, false},
		{"failure undoes", errors.New("boom"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			func() (err error) {
				s := New(nil)
				defer s.OnError(context.Background(), &err)
				s.Add("undo", func(context.Context) error { ran = true; return nil })
				return tc.err
			}()
			if ran != tc.want {
				t.Fatalf("undo ran = %v, want %v", ran, tc.want)
			}
		})
	}
}

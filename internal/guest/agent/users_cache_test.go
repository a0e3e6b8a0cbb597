package agent_test

import (
	"errors"
	"testing"

	"github.com/forkbox/forkbox/internal/guest/agent"
)

// Accounts are read from the databases once per state of them: a second
// lookup, a known or an unknown user, reads nothing; a change (useradd)
// makes the next lookup read them again and see the new answer.
func TestAccountCache(t *testing.T) {
	stamp := "1"
	lookup := agent.NewAccountCache(func() string { return stamp })
	reads := 0
	uids := map[string]uint32{"user": 1000}
	resolve := func(name string) (uint32, error) {
		reads++
		if uid, ok := uids[name]; ok {
			return uid, nil
		}
		return 0, errors.New("unknown user")
	}
	for _, tt := range []struct {
		name      string
		newStamp  string
		wantUID   uint32
		wantErr   bool
		wantReads int
	}{
		{"user", "", 1000, false, 1},
		{"user", "", 1000, false, 1},
		{"ghost", "", 0, true, 2},
		{"ghost", "", 0, true, 2},
		{"ghost", "2", 1001, false, 3}, // useradd ghost
		{"user", "", 1000, false, 4},
		{"ghost", "", 1001, false, 4},
	} {
		if tt.newStamp != "" {
			stamp, uids["ghost"] = tt.newStamp, 1001
		}
		uid, err := lookup(tt.name, resolve)
		if uid != tt.wantUID || (err != nil) != tt.wantErr || reads != tt.wantReads {
			t.Errorf("lookup(%s) at stamp %s = %d, %v after %d reads; want %d, error %v, %d reads",
				tt.name, stamp, uid, err, reads, tt.wantUID, tt.wantErr, tt.wantReads)
		}
	}
}

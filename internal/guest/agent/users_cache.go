package agent

import "sync"

// accounts remembers lookupAccount's answers while the account databases
// are unchanged: every Connect call resolves its user, and reading and
// parsing /etc/passwd and /etc/group took 0.6–0.9 ms of a pooled
// commands.run's ~6 ms inside the sandbox; two stats take a tenth of that.
var accounts = accountCache{stampOf: accountDBStamp}

// accountCache maps user names to their accounts (or lookup errors) as of
// one state of the databases.
type accountCache struct {
	stampOf func() string // names the databases' state

	mu     sync.Mutex
	stamp  string                   // guarded by mu; the databases' state the answers are of
	byName map[string]accountAnswer // guarded by mu
}

type accountAnswer struct {
	acct *account
	err  error
}

// lookup returns name's account through resolve, which it calls only when
// the databases changed since name was last resolved. The account is a
// copy the caller may keep.
func (c *accountCache) lookup(name string, resolve func(string) (*account, error)) (*account, error) {
	stamp := c.stampOf()
	c.mu.Lock()
	if c.stamp != stamp {
		c.stamp, c.byName = stamp, map[string]accountAnswer{}
	}
	ans, ok := c.byName[name]
	c.mu.Unlock()
	if !ok {
		ans.acct, ans.err = resolve(name)
		c.mu.Lock()
		if c.stamp == stamp {
			c.byName[name] = ans
		}
		c.mu.Unlock()
	}
	if ans.err != nil {
		return nil, ans.err
	}
	cp := *ans.acct
	cp.Groups = append([]uint32(nil), ans.acct.Groups...)
	return &cp, nil
}

// accountDBStamp names the state of /etc/passwd and /etc/group (useradd
// replaces them by a rename); fileStamps remembers it while /etc is
// unchanged.
func accountDBStamp() string {
	return fileStamps.stamp("accounts", []stampDir{{"/etc", []string{"passwd", "group"}}}, func() (string, bool) {
		return stampFiles("/etc/passwd", "/etc/group")
	})
}

// userExists reports whether name is a known user.
func userExists(name string) bool {
	_, err := lookupAccount(name)
	return err == nil
}

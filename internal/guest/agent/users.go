package agent

import (
	"errors"
	"fmt"
	"net/http"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// fallbackUser is the account E2B templates run commands as; the agent uses
// it as the default when it exists and nothing else was configured.
const fallbackUser = "user"

// errUnknownUser marks a request naming an account that does not exist.
var errUnknownUser = errors.New("unknown user")

// account is a resolved local user: everything needed to run a process as
// it and to give it ownership of files.
type account struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups, including GID
	Home   string
}

// lookupAccount resolves a user name through /etc/passwd and /etc/group,
// remembered while they are unchanged (users_cache.go).
func lookupAccount(name string) (*account, error) {
	return accounts.lookup(name, resolveAccount)
}

// resolveAccount reads name's account from /etc/passwd and /etc/group.
func resolveAccount(name string) (*account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", errUnknownUser, name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %q has non-numeric ids: %w", name, err)
	}
	acct := &account{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	acct.Groups = []uint32{acct.GID}
	// A missing group database only loses supplementary groups; the
	// primary group is still right, so carry on.
	gids, _ := u.GroupIds()
	for _, g := range gids {
		if v, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(v) != acct.GID {
			acct.Groups = append(acct.Groups, uint32(v))
		}
	}
	return acct, nil
}

// credential returns the uid/gid/groups to run a process as this account.
func (ac *account) credential() *syscall.Credential {
	return &syscall.Credential{Uid: ac.UID, Gid: ac.GID, Groups: ac.Groups}
}

// defaultUserName picks the user for requests that name none: /init's or
// Config's default, else "user" if it exists, else root.
func (a *Agent) defaultUserName() string {
	if name, _ := a.state.defaults(); name != "" {
		return name
	}
	if userExists(fallbackUser) {
		return fallbackUser
	}
	return "root"
}

// requestAccount resolves the acting user of a Connect call. The E2B SDK
// sends it as HTTP Basic auth with the user name and an empty password.
func (a *Agent) requestAccount(h http.Header) (*account, error) {
	r := http.Request{Header: h}
	name, _, ok := r.BasicAuth()
	if !ok || name == "" {
		name = a.defaultUserName()
	}
	return lookupAccount(name)
}

// namedAccount resolves an explicit user name (the /files "username" query
// parameter), falling back to the default user when empty.
func (a *Agent) namedAccount(name string) (*account, error) {
	if name == "" {
		name = a.defaultUserName()
	}
	return lookupAccount(name)
}

// workdirFor is where relative paths resolve and processes start for acct:
// the configured default workdir, else the account's home.
func (a *Agent) workdirFor(acct *account) string {
	if _, wd := a.state.defaults(); wd != "" {
		return wd
	}
	return acct.Home
}

// resolvePath turns a client path into an absolute, cleaned one: "~" means
// the account's home and relative paths start at its workdir.
func (a *Agent) resolvePath(p string, acct *account) string {
	switch {
	case p == "~":
		p = acct.Home
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(acct.Home, p[2:])
	case !filepath.IsAbs(p):
		p = filepath.Join(a.workdirFor(acct), p)
	}
	return filepath.Clean(p)
}

package agent

import (
	"crypto/subtle"
	"maps"
	"sync"
)

// initState is what POST /init configures: environment variables for new
// processes, the access token and the default user and workdir. The daemon
// calls /init after every create and restore, so values may change over the
// agent's life (a clone gets a fresh token).
type initState struct {
	mu             sync.Mutex
	envVars        map[string]string // guarded by mu
	accessToken    string            // guarded by mu; empty = no auth
	defaultUser    string            // guarded by mu
	defaultWorkdir string            // guarded by mu
}

func newInitState(cfg Config) *initState {
	s := &initState{
		envVars:        map[string]string{},
		accessToken:    cfg.AccessToken,
		defaultUser:    cfg.DefaultUser,
		defaultWorkdir: cfg.DefaultWorkdir,
	}
	maps.Copy(s.envVars, cfg.EnvVars)
	return s
}

// envs returns a copy of the /init environment variables.
func (s *initState) envs() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.envVars)
}

// token returns the access token, empty when auth is off.
func (s *initState) token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accessToken
}

// tokenMatches reports whether got equals the access token, in constant time
// so the comparison does not leak the token byte by byte.
func (s *initState) tokenMatches(got string) bool {
	want := s.token()
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

// defaults returns the default user and workdir set by /init or Config.
func (s *initState) defaults() (user, workdir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.defaultUser, s.defaultWorkdir
}

// initRequest is the JSON body of POST /init (field names as in envd.yaml).
type initRequest struct {
	EnvVars        map[string]string `json:"envVars"`
	AccessToken    *string           `json:"accessToken"`
	DefaultUser    *string           `json:"defaultUser"`
	DefaultWorkdir *string           `json:"defaultWorkdir"`
	Timestamp      *string           `json:"timestamp"`
	// CPUCount is forkbox's: the CPUs processes started from now on see.
	CPUCount int `json:"cpuCount,omitempty"`
	// EgressCA is forkbox's: the PEM of the egress proxy's CA, to trust.
	EgressCA string `json:"egressCA,omitempty"`
	// Volumes is forkbox's: where the sandbox's volumes appear (volumes.go).
	Volumes []volumeLink `json:"forkboxVolumes,omitempty"`
	// CommandPool is forkbox's: how many login shells to keep ready for
	// commands.run (0 turns the command pool off); absent keeps the agent's.
	CommandPool *int `json:"commandPool,omitempty"`
}

// apply merges an /init request into the state. Env vars are merged, not
// replaced, matching envd, so a second /init only adds or overrides.
func (s *initState) apply(req initRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.envVars, req.EnvVars)
	if req.AccessToken != nil {
		s.accessToken = *req.AccessToken
	}
	if req.DefaultUser != nil && *req.DefaultUser != "" {
		s.defaultUser = *req.DefaultUser
	}
	if req.DefaultWorkdir != nil && *req.DefaultWorkdir != "" {
		s.defaultWorkdir = *req.DefaultWorkdir
	}
}

package agent

// CommandPoolHits is how many commands a's pooled shells ran.
func CommandPoolHits(a *Agent) uint64 { return a.shells.hits.Load() }

// CommandPoolIdle is how many shells wait in a's pool.
func CommandPoolIdle(a *Agent) int {
	a.shells.mu.Lock()
	defer a.shells.mu.Unlock()
	return len(a.shells.idle)
}

// CommandPoolIdlePIDs returns the pids of the shells waiting in a's pool.
func CommandPoolIdlePIDs(a *Agent) map[int]bool { return a.shells.idlePIDs() }

// CommandPoolSeeds returns the RANDOM seeds of the shells waiting in a's pool.
func CommandPoolSeeds(a *Agent) []uint16 {
	a.shells.mu.Lock()
	defer a.shells.mu.Unlock()
	var seeds []uint16
	for _, sh := range a.shells.idle {
		seeds = append(seeds, sh.seed)
	}
	return seeds
}

// NewAccountCache returns a lookup through a cache of the given stamp function
// and resolver, as lookupAccount does through the real ones.
func NewAccountCache(stamp func() string) func(name string, resolve func(string) (uid uint32, err error)) (uint32, error) {
	c := &accountCache{stampOf: stamp}
	return func(name string, resolve func(string) (uint32, error)) (uint32, error) {
		acct, err := c.lookup(name, func(n string) (*account, error) {
			uid, err := resolve(n)
			if err != nil {
				return nil, err
			}
			return &account{Name: n, UID: uid, Groups: []uint32{uid}}, nil
		})
		if err != nil {
			return 0, err
		}
		return acct.UID, nil
	}
}

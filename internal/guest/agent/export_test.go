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

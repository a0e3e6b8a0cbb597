package gvisor

// StandbyFill reports the standby containers ready now and the number the
// runtime aims to keep per sandbox shape (Config.Standby), for metrics.
func (r *Runtime) StandbyFill() (ready, perShape int) {
	s := r.standby
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pools {
		ready += len(p.boxes)
	}
	return ready, s.target
}

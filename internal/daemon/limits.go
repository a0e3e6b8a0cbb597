package daemon

import "github.com/forkbox/forkbox/internal/sandbox"

// sandboxLimits is o.Limits with zero fields taken from the host: its
// CPUs, its memory and the disk free under the data dir.
func sandboxLimits(o Options) (sandbox.Limits, error) {
	host, err := sandbox.HostLimits(o.DataDir)
	if err != nil {
		return sandbox.Limits{}, err
	}
	l := o.Limits
	if l.MaxCPUs <= 0 {
		l.MaxCPUs = host.MaxCPUs
	}
	if l.MaxMemoryMB <= 0 {
		l.MaxMemoryMB = host.MaxMemoryMB
	}
	if l.MaxDiskMB <= 0 {
		l.MaxDiskMB = host.MaxDiskMB
	}
	o.Logger.Info("sandbox limits", "maxCPUs", l.MaxCPUs, "maxMemoryMB", l.MaxMemoryMB, "maxDiskMB", l.MaxDiskMB)
	return l, nil
}

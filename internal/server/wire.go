package server

import (
	"time"

	"github.com/forkbox/forkbox/internal/sandbox"
)

// The E2B wire shapes (spec/openapi.yml of e2b-dev/infra). Fields the
// spec marks required are always present: the Python client pops them.

// sandboxJSON is the Sandbox schema, answered by create and connect.
type sandboxJSON struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	Alias              string  `json:"alias,omitempty"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// lifecycleJSON is the SandboxLifecycle schema.
type lifecycleJSON struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// volumeMountJSON is the SandboxVolumeMount schema (forkbox has none yet).
type volumeMountJSON struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// listedJSON is the ListedSandbox schema.
type listedJSON struct {
	TemplateID   string            `json:"templateID"`
	Alias        string            `json:"alias,omitempty"`
	SandboxID    string            `json:"sandboxID"`
	ClientID     string            `json:"clientID"`
	StartedAt    string            `json:"startedAt"`
	EndAt        string            `json:"endAt"`
	CPUCount     int               `json:"cpuCount"`
	MemoryMB     int               `json:"memoryMB"`
	DiskSizeMB   int               `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []volumeMountJSON `json:"volumeMounts"`
}

// detailJSON is the SandboxDetail schema.
type detailJSON struct {
	listedJSON
	EnvdAccessToken     string        `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool         `json:"allowInternetAccess"`
	Domain              *string       `json:"domain"`
	Lifecycle           lifecycleJSON `json:"lifecycle"`
	Network             *networkJSON  `json:"network,omitempty"`
	// KillReason and KilledAt are forkbox's: set (with state "killed")
	// for a sandbox that died on its own.
	KillReason string `json:"killReason,omitempty"`
	KilledAt   string `json:"killedAt,omitempty"`
	// Operation is forkbox's: what the sandbox is busy with (creating,
	// pausing, resuming, snapshotting, killing) while state shows where
	// it is going; absent when idle. A pause answers at once, so a client
	// that must know it finished waits for this to go.
	Operation string `json:"operation,omitempty"`
}

// metricJSON is the SandboxMetric schema.
type metricJSON struct {
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       uint64  `json:"memUsed"`
	MemTotal      uint64  `json:"memTotal"`
	MemCache      uint64  `json:"memCache"`
	DiskUsed      uint64  `json:"diskUsed"`
	DiskTotal     uint64  `json:"diskTotal"`
}

// wireTime formats a time as RFC 3339 in UTC.
func wireTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// domain is the domain to report: null unless configured.
func (s *Server) domain() *string {
	if s.cfg.Domain == "" {
		return nil
	}
	d := s.cfg.Domain
	return &d
}

// toSandboxJSON renders a sandbox for create and connect.
func (s *Server) toSandboxJSON(sb *sandbox.Sandbox) sandboxJSON {
	out := sandboxJSON{
		TemplateID: sb.TemplateID, SandboxID: sb.ID, ClientID: sb.ClientID,
		EnvdVersion: sb.EnvdVersion, Alias: sb.Alias, Domain: s.domain(),
	}
	if sb.Secure {
		out.EnvdAccessToken = sb.EnvdAccessToken
	}
	if s.trafficTokenRequired(sb) {
		tok := sb.TrafficAccessToken
		out.TrafficAccessToken = &tok
	}
	return out
}

// volumeMountsJSON renders a sandbox's volume mounts (never null).
func volumeMountsJSON(vms []sandbox.VolumeMount) []volumeMountJSON {
	out := make([]volumeMountJSON, 0, len(vms))
	for _, vm := range vms {
		out = append(out, volumeMountJSON{Name: vm.Name, Path: vm.Path})
	}
	return out
}

// toListed renders a sandbox for listings.
func toListed(sb *sandbox.Sandbox) listedJSON {
	md := sb.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return listedJSON{
		TemplateID: sb.TemplateID, Alias: sb.Alias, SandboxID: sb.ID, ClientID: sb.ClientID,
		StartedAt: wireTime(sb.StartedAt), EndAt: wireTime(sb.EndAt),
		CPUCount: sb.CPUCount, MemoryMB: sb.MemoryMB, DiskSizeMB: sb.DiskSizeMB,
		Metadata: md, State: string(sb.State.Public()), EnvdVersion: sb.EnvdVersion,
		VolumeMounts: volumeMountsJSON(sb.VolumeMounts),
	}
}

// toDetail renders a sandbox for GET /sandboxes/{id}.
func (s *Server) toDetail(sb *sandbox.Sandbox) detailJSON {
	allow := sb.AllowInternet
	onTimeout := "kill"
	if sb.AutoPause {
		onTimeout = "pause"
	}
	out := detailJSON{
		listedJSON: toListed(sb), AllowInternetAccess: &allow, Domain: s.domain(),
		Lifecycle: lifecycleJSON{AutoResume: sb.AutoResume, OnTimeout: onTimeout},
		Network:   toNetworkJSON(sb),
	}
	if sb.Secure {
		out.EnvdAccessToken = sb.EnvdAccessToken
	}
	if sb.KillReason != "" {
		out.KillReason, out.KilledAt = sb.KillReason, wireTime(sb.KilledAt)
	}
	switch sb.State {
	case sandbox.StateRunning, sandbox.StatePaused, sandbox.StateKilled:
	default:
		out.Operation = string(sb.State)
	}
	return out
}

// toMetric renders one metric reading.
func toMetric(m sandbox.Metric) metricJSON {
	return metricJSON{
		Timestamp: wireTime(m.Timestamp), TimestampUnix: m.Timestamp.Unix(),
		CPUCount: m.CPUCount, CPUUsedPct: m.CPUUsedPct,
		MemUsed: m.MemUsed, MemTotal: m.MemTotal, MemCache: m.MemCache,
		DiskUsed: m.DiskUsed, DiskTotal: m.DiskTotal,
	}
}

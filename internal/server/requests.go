package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// createBody is the NewSandbox / NewSandboxV2 request, plus forkbox's
// cpuCount and memoryMB. Fields E2B defines that forkbox does not use yet
// (mcp) are accepted and ignored.
type createBody struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	AutoPause           bool              `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	AutoResume          autoResume        `json:"autoResume"`
	Secure              bool              `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkBody      `json:"network"`
	IAM                 *netpolicy.IAM    `json:"iam"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int               `json:"memoryMB"`
	DiskSizeMB          int               `json:"diskSizeMB"`
	VolumeMounts        []volumeMountJSON `json:"volumeMounts"`
}

// autoResume accepts E2B's {"enabled": bool} and a plain bool.
type autoResume struct{ Enabled bool }

// UnmarshalJSON implements json.Unmarshaler.
func (a *autoResume) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("null")) {
		return nil
	}
	if len(data) > 0 && data[0] != '{' {
		return json.Unmarshal(data, &a.Enabled)
	}
	var obj struct {
		Enabled bool `json:"enabled"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	a.Enabled = obj.Enabled
	return nil
}

// seconds validates a duration in seconds from a request field.
func seconds(field string, v int64) (time.Duration, error) {
	if v < 0 {
		return 0, fmt.Errorf("%s must not be negative: %w", field, errdefs.ErrInvalidArgument)
	}
	if v > int64(365*24*time.Hour/time.Second) {
		return 0, fmt.Errorf("%s is too large: %w", field, errdefs.ErrInvalidArgument)
	}
	return time.Duration(v) * time.Second, nil
}

// optionalSeconds validates an optional duration field; absent means 0
// (the Manager's default).
func optionalSeconds(field string, v *int64) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	return seconds(field, *v)
}

// request converts the body into the Manager's request. alwaysSecure is
// the v2 create's rule: every sandbox's envd access is secured.
func (b *createBody) request(alwaysSecure bool) (sandbox.CreateRequest, error) {
	if b.TemplateID == "" {
		return sandbox.CreateRequest{}, fmt.Errorf("templateID is required: %w", errdefs.ErrInvalidArgument)
	}
	filesOnly, err := b.autoPauseFilesOnly()
	if err != nil {
		return sandbox.CreateRequest{}, err
	}
	req := sandbox.CreateRequest{
		TemplateID: b.TemplateID, AutoPause: b.AutoPause, AutoResume: b.AutoResume.Enabled,
		Secure: b.Secure || alwaysSecure || b.privateTraffic(), AllowInternet: b.allowInternet(),
		IAM:      b.IAM,
		Metadata: b.Metadata, EnvVars: b.EnvVars, CPUCount: b.CPUCount, MemoryMB: b.MemoryMB,
		DiskSizeMB: b.DiskSizeMB, PrivateTraffic: b.privateTraffic(), Network: b.networkRules(), AutoPauseFilesOnly: filesOnly,
		Inbound: b.inbound(), VolumeMounts: b.volumeMounts(),
	}
	if b.Timeout != nil {
		d, err := seconds("timeout", *b.Timeout)
		if err != nil {
			return sandbox.CreateRequest{}, err
		}
		req.Timeout = d
	}
	return req, nil
}

// privateTraffic reports whether the sandbox's ports must require the
// traffic access token (network.allowPublicTraffic = false).
func (b *createBody) privateTraffic() bool {
	return b.Network != nil && b.Network.AllowPublicTraffic != nil && !*b.Network.AllowPublicTraffic
}

// allowInternet is allow_internet_access (nil: absent, which means true;
// SDK 2.51 no longer sends it). Network rules are enforced as stated.
func (b *createBody) allowInternet() *bool { return b.AllowInternetAccess }

// timeoutBody is the body of timeout, connect and resume.
type timeoutBody struct {
	Timeout *int64 `json:"timeout"`
}

// connectBody is ConnectSandbox: timeout plus memory (false: reboot).
type connectBody struct {
	Timeout *int64 `json:"timeout"`
	Memory  *bool  `json:"memory"`
}

// refreshBody is the body of refreshes.
type refreshBody struct {
	Duration *int64 `json:"duration"`
}

// resumeBody is the deprecated resume's ResumedSandbox request. autoPause
// is accepted; forkbox keeps the sandbox's own setting.
type resumeBody struct {
	Timeout   *int64 `json:"timeout"`
	AutoPause *bool  `json:"autoPause"`
}

// pauseBody is SandboxPauseRequest. forkbox always keeps memory: memory =
// false is accepted and a full snapshot is taken anyway.
type pauseBody struct {
	Memory *bool `json:"memory"`
}

// snapshotBody is SandboxSnapshotRequest plus forkbox's ttl (seconds,
// 0 or absent: kept until deleted).
type snapshotBody struct {
	Name string `json:"name"`
	TTL  *int64 `json:"ttl"`
}

// forkBody is SandboxForkRequest. Absent count means 1; absent or zero
// timeout inherits the source's remaining time (default for a paused one).
type forkBody struct {
	Count   *int   `json:"count"`
	Timeout *int64 `json:"timeout"`
}

// cloneBody is Novita's clone request (nodeID is accepted and ignored).
type cloneBody struct {
	Count   *int   `json:"count"`
	Strict  bool   `json:"strict"`
	Timeout *int64 `json:"timeout"`
	// Concurrency (forkbox extension) bounds parallel restores; 0 is the
	// daemon's default.
	Concurrency int `json:"concurrency"`
}

// rollbackBody is CubeSandbox's rollback request.
type rollbackBody struct {
	SnapshotID string `json:"snapshotID"`
}

// maxForkCount is the spec's bound on fork and clone counts.
const maxForkCount = 100

// forkCount validates a fork or clone count: absent means 1.
func forkCount(n *int) (int, error) {
	if n == nil {
		return 1, nil
	}
	if *n < 1 || *n > maxForkCount {
		return 0, fmt.Errorf("count must be between 1 and %d: %w", maxForkCount, errdefs.ErrInvalidArgument)
	}
	return *n, nil
}

// autoPauseFilesOnly reads autoPauseMemory (onTimeout keepMemory): false
// makes the timeout's pause keep only the files. As E2B, that is refused
// with auto-resume — traffic must never cold-boot a sandbox — and without
// autoPause.
func (b *createBody) autoPauseFilesOnly() (bool, error) {
	if b.AutoPauseMemory == nil || *b.AutoPauseMemory {
		return false, nil
	}
	if !b.AutoPause {
		return false, fmt.Errorf("autoPauseMemory is only allowed with autoPause: %w", errdefs.ErrInvalidArgument)
	}
	if b.AutoResume.Enabled {
		return false, fmt.Errorf("autoResume cannot be enabled with autoPauseMemory: false: a filesystem-only pause is resumed by connect, never by traffic: %w", errdefs.ErrInvalidArgument)
	}
	return true, nil
}

// volumeMounts converts E2B's SandboxVolumeMount list.
func (b *createBody) volumeMounts() []sandbox.VolumeMountRequest {
	var out []sandbox.VolumeMountRequest
	for _, vm := range b.VolumeMounts {
		out = append(out, sandbox.VolumeMountRequest{Name: vm.Name, Path: vm.Path})
	}
	return out
}

package sandbox

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
)

// maxVolumeMounts bounds the volumes of one sandbox.
const maxVolumeMounts = 16

// volumeLink is one /init forkboxVolumes entry (the agent's volumes.go).
type volumeLink struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// volumeLinks are the links making each of vms appear at its path: the
// runtime puts the i-th volume at runtime.VolumeRoot/i.
func volumeLinks(vms []store.VolumeMount) []volumeLink {
	var out []volumeLink
	for i, vm := range vms {
		out = append(out, volumeLink{Path: vm.Path, Target: path.Join(runtime.VolumeRoot, strconv.Itoa(i))})
	}
	return out
}

// reservedPaths are where a volume may not go: the sandbox's own kernel
// filesystems and the volume mount itself.
var reservedPaths = []string{"/proc", "/sys", "/dev", runtime.VolumeRoot}

// checkMountPath vets one requested mount path.
func checkMountPath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("volume mount path %q: want a clean absolute path other than /: %w", p, errdefs.ErrInvalidArgument)
	}
	for _, r := range reservedPaths {
		if p == r || strings.HasPrefix(p, r+"/") {
			return fmt.Errorf("volume mount path %q: %s is reserved: %w", p, r, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// resolveMounts turns the requested mounts into records, in request
// order. A snapshot's sandboxes mount the snapshot's volumes again (it did
// not copy them); the request may only repeat those.
func (m *Manager) resolveMounts(ctx context.Context, reqs []VolumeMountRequest, tpl *store.Template) ([]store.VolumeMount, error) {
	if len(tpl.Volumes) > 0 {
		if len(reqs) > 0 && !sameMounts(reqs, tpl.Volumes) {
			return nil, fmt.Errorf("snapshot %s mounts its own volumes; volumeMounts may only repeat them: %w", tpl.ID, errdefs.ErrInvalidArgument)
		}
		for _, vm := range tpl.Volumes {
			if _, err := m.cfg.Store.GetVolume(ctx, vm.VolumeID); err != nil {
				return nil, fmt.Errorf("snapshot %s mounts volume %s (%s), which is gone: %w", tpl.ID, vm.Name, vm.VolumeID, errdefs.ErrInvalidArgument)
			}
		}
		return slices.Clone(tpl.Volumes), nil
	}
	if len(reqs) > maxVolumeMounts {
		return nil, fmt.Errorf("%d volume mounts, at most %d: %w", len(reqs), maxVolumeMounts, errdefs.ErrInvalidArgument)
	}
	if len(reqs) > 0 && m.cfg.Volumes == nil {
		return nil, fmt.Errorf("volumeMounts: this daemon keeps no volumes: %w", errdefs.ErrInvalidArgument)
	}
	var out []store.VolumeMount
	for _, r := range reqs {
		if err := checkMountPath(r.Path); err != nil {
			return nil, err
		}
		for _, o := range out {
			if o.Path == r.Path || strings.HasPrefix(r.Path, o.Path+"/") || strings.HasPrefix(o.Path, r.Path+"/") {
				return nil, fmt.Errorf("volume mount paths %s and %s overlap: %w", o.Path, r.Path, errdefs.ErrInvalidArgument)
			}
		}
		v, err := m.findVolume(ctx, r.Name)
		if err != nil {
			return nil, fmt.Errorf("volumeMounts: volume %q: %v: %w", r.Name, err, errdefs.ErrInvalidArgument)
		}
		out = append(out, store.VolumeMount{VolumeID: v.ID, Name: v.Name, Path: r.Path})
	}
	return out, nil
}

// sameMounts reports whether reqs name exactly vms (by name or id, path).
func sameMounts(reqs []VolumeMountRequest, vms []store.VolumeMount) bool {
	if len(reqs) != len(vms) {
		return false
	}
	for _, r := range reqs {
		if !slices.ContainsFunc(vms, func(vm store.VolumeMount) bool {
			return vm.Path == r.Path && (vm.Name == r.Name || vm.VolumeID == r.Name)
		}) {
			return false
		}
	}
	return true
}

// holdVolumes keeps volumes from being deleted between a create's
// resolving them and its sandbox being registered (DeleteVolume looks
// for users among the registered sandboxes); the returned func ends the
// hold and may be called more than once.
func (m *Manager) holdVolumes() func() {
	m.volMu.RLock()
	return sync.OnceFunc(m.volMu.RUnlock)
}

// volumeDirs are the host directories of vms, each mounted (Ensure).
func (m *Manager) volumeDirs(ctx context.Context, vms []store.VolumeMount) ([]string, error) {
	if len(vms) == 0 {
		return nil, nil
	}
	host, err := m.volumeHost()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, vm := range vms {
		if err := host.Ensure(ctx, vm.VolumeID); err != nil {
			return nil, fmt.Errorf("volume %s: %w", vm.Name, err)
		}
		out = append(out, host.Dir(vm.VolumeID))
	}
	return out, nil
}

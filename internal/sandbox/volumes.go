package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/forkbox/forkbox/internal/cleanup"
	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/volumes"
)

// Volume is one named volume as the API shows it.
type Volume struct {
	ID   string
	Name string
	// Token is the bearer token of the volume's content API.
	Token  string
	SizeMB int
}

// volumeName is what a volume may be called: E2B's volumeMounts name
// volumes, so names are unique and URL- and path-safe.
var volumeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

func volumeOf(v *store.Volume) *Volume {
	return &Volume{ID: v.ID, Name: v.Name, Token: v.Token, SizeMB: v.SizeMB}
}

// volumeHost is the volume storage, or ErrUnavailable without one.
func (m *Manager) volumeHost() (*volumes.Host, error) {
	if m.cfg.Volumes == nil {
		return nil, fmt.Errorf("this daemon keeps no volumes: %w", errdefs.ErrUnavailable)
	}
	return m.cfg.Volumes, nil
}

// CreateVolume makes a new empty volume of the daemon's volume size.
func (m *Manager) CreateVolume(ctx context.Context, name string) (*Volume, error) {
	host, err := m.volumeHost()
	if err != nil {
		return nil, err
	}
	if !volumeName.MatchString(name) {
		return nil, fmt.Errorf("volume name %q: letters, digits, '.', '_' and '-', at most 63: %w", name, errdefs.ErrInvalidArgument)
	}
	if _, err := m.cfg.Store.GetVolumeByName(ctx, name); err == nil {
		return nil, fmt.Errorf("volume %q: %w", name, errdefs.ErrAlreadyExists)
	}
	tok := make([]byte, 32)
	rand.Read(tok)
	v := &store.Volume{ID: runtime.NewID(), Name: name, Token: base64.RawURLEncoding.EncodeToString(tok),
		SizeMB: m.cfg.VolumeSizeMB, Node: m.cfg.ClientID, CreatedAt: m.now()}
	cl := cleanup.New(m.log)
	defer cl.Run(context.WithoutCancel(ctx))
	if err := host.Create(ctx, v.ID, v.SizeMB); err != nil {
		return nil, err
	}
	cl.Add("remove volume storage", func(ctx context.Context) error { return host.Remove(ctx, v.ID) })
	if err := m.cfg.Store.PutVolume(ctx, v); err != nil {
		return nil, err
	}
	cl.Disarm()
	m.log.Info("volume created", "volume", v.ID, "name", name, "sizeMB", v.SizeMB)
	return volumeOf(v), nil
}

// ListVolumes returns every volume, oldest first.
func (m *Manager) ListVolumes(ctx context.Context) ([]*Volume, error) {
	vs, err := m.cfg.Store.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Volume, 0, len(vs))
	for _, v := range vs {
		out = append(out, volumeOf(v))
	}
	return out, nil
}

// GetVolume returns volume id (its id or its name).
func (m *Manager) GetVolume(ctx context.Context, id string) (*Volume, error) {
	v, err := m.findVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	return volumeOf(v), nil
}

func (m *Manager) findVolume(ctx context.Context, idOrName string) (*store.Volume, error) {
	v, err := m.cfg.Store.GetVolume(ctx, idOrName)
	if errors.Is(err, errdefs.ErrNotFound) {
		v, err = m.cfg.Store.GetVolumeByName(ctx, idOrName)
	}
	return v, err
}

// DeleteVolume removes volume id and its files. A volume some sandbox
// (running or paused) mounts is ErrConflict.
func (m *Manager) DeleteVolume(ctx context.Context, id string) error {
	host, err := m.volumeHost()
	if err != nil {
		return err
	}
	// No create may resolve the volume while it goes (holdVolumes).
	m.volMu.Lock()
	defer m.volMu.Unlock()
	v, err := m.cfg.Store.GetVolume(ctx, id)
	if err != nil {
		return err
	}
	if users := m.volumeUsers(v.ID); len(users) > 0 {
		return fmt.Errorf("volume %s is mounted by sandbox %s: %w", v.ID, users[0], errdefs.ErrConflict)
	}
	if err := m.cfg.Store.DeleteVolume(ctx, v.ID); err != nil {
		return err
	}
	m.log.Info("volume deleted", "volume", v.ID, "name", v.Name)
	return host.Remove(ctx, v.ID)
}

// volumeUsers lists the sandboxes not yet killed that mount volume id.
func (m *Manager) volumeUsers(id string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for sid, e := range m.boxes {
		if slices.ContainsFunc(e.rec.Volumes, func(vm store.VolumeMount) bool { return vm.VolumeID == id }) {
			out = append(out, sid)
		}
	}
	slices.Sort(out)
	return out
}

// VolumeContent opens volume id's files for the content API, which
// authenticates with the volume's own token. Close the result.
func (m *Manager) VolumeContent(ctx context.Context, id, token string) (*volumes.Content, error) {
	host, err := m.volumeHost()
	if err != nil {
		return nil, err
	}
	v, err := m.cfg.Store.GetVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(v.Token)) != 1 {
		return nil, fmt.Errorf("volume %s: bad token: %w", id, errdefs.ErrUnauthenticated)
	}
	if err := host.Ensure(ctx, v.ID); err != nil {
		return nil, err
	}
	return host.Open(v.ID)
}

// EnsureVolumes mounts every volume's storage (after a host reboot the
// images are there, the mounts are not) and removes storage no record
// names: the daemon's start, before it serves.
func (m *Manager) EnsureVolumes(ctx context.Context) error {
	if m.cfg.Volumes == nil {
		return nil
	}
	vs, err := m.cfg.Store.ListVolumes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	recorded := make(map[string]bool, len(vs))
	for _, v := range vs {
		recorded[v.ID] = true
		if m.owns(v.Node) { // another node's volume lives on its disk
			errs = append(errs, m.cfg.Volumes.Ensure(ctx, v.ID))
		}
	}
	return errors.Join(append(errs, m.removeUnrecordedVolumes(ctx, recorded))...)
}

// removeUnrecordedVolumes removes the storage of volumes no record names:
// a daemon killed inside CreateVolume, between making the storage and
// writing the record, left it, and no API can reach it. It runs at
// start, before any create.
func (m *Manager) removeUnrecordedVolumes(ctx context.Context, recorded map[string]bool) error {
	ids, err := m.cfg.Volumes.IDs()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if recorded[id] {
			continue
		}
		if err := m.cfg.Volumes.Remove(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		m.log.Info("removed the storage of a volume no record names (a create cut short)", "volume", id)
	}
	return errors.Join(errs...)
}

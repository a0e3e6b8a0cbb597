package sandbox

import (
	"context"
	"fmt"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// This file says where a volume's requests go in a cluster: a volume's
// storage is on the node that made it (its record's Node), so its
// deletion, its content API and the creates that mount it are answered
// there. Another node would find no storage (a create's 404), or delete
// the record alone and leave the storage, mounted, on its node.

// VolumeHome returns where a request about volume idOrName (its id or
// name) must go when another node of the cluster keeps its storage: that
// node's base URL, or "" when this node answers (its own volume, no
// cluster, or no such volume: the local handler then gives its usual
// answer). A volume of a dead node is ErrUnavailable.
func (m *Manager) VolumeHome(ctx context.Context, idOrName string) (string, error) {
	nodes := m.nodes.Load()
	if nodes == nil || idOrName == "" {
		return "", nil
	}
	v, err := m.findVolume(ctx, idOrName)
	if errdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return m.volumeNodeURL(ctx, *nodes, v)
}

// CreateHome is VolumeHome for a create from templateID mounting the
// volumes named by mounts: the node keeping the first of them, or, with
// none named, the first of the volumes a snapshot's sandboxes mount again.
func (m *Manager) CreateHome(ctx context.Context, templateID string, mounts []string) (string, error) {
	if m.nodes.Load() == nil {
		return "", nil
	}
	if len(mounts) > 0 {
		return m.VolumeHome(ctx, mounts[0])
	}
	if templateID == "" {
		return "", nil
	}
	tpl, err := m.st.GetTemplate(ctx, templateID)
	if err != nil || len(tpl.Volumes) == 0 {
		return "", nil // the local handler answers a missing template
	}
	return m.VolumeHome(ctx, tpl.Volumes[0].VolumeID)
}

// volumeNodeURL is the base URL of the node keeping v, "" for this node.
func (m *Manager) volumeNodeURL(ctx context.Context, nodes NodeDirectory, v *store.Volume) (string, error) {
	if m.owns(v.Node) {
		return "", nil
	}
	url, alive, err := nodes.NodeURL(ctx, v.Node)
	switch {
	case err != nil && !errdefs.IsNotFound(err):
		return "", err
	case alive:
		return url, nil
	case errdefs.IsNotFound(err):
		return "", fmt.Errorf("volume %s is kept by node %s, which is not registered: %w", v.Name, v.Node, errdefs.ErrUnavailable)
	}
	return "", fmt.Errorf("volume %s is kept by node %s, whose lease ran out (the node is dead): %w", v.Name, v.Node, errdefs.ErrUnavailable)
}

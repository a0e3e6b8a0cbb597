package client

import (
	"context"
	"net/http"
	"time"
)

// PauseFilesystem pauses a sandbox keeping only its files (POST
// /sandboxes/{id}/pause {memory: false}): cheaper to store than Pause, and
// the resume cold-boots it — files kept, processes gone.
func (c *Client) PauseFilesystem(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/pause", in: map[string]bool{"memory": false}})
	return err
}

// ConnectReboot is Connect asking for a fresh boot (E2B's connect({onResume:
// 'reboot'}), wire memory: false): a paused sandbox is cold-booted from its
// files whatever kind of pause it had; a running one is only extended.
func (c *Client) ConnectReboot(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	in := map[string]any{"timeout": seconds(timeout), "memory": false}
	sb := &Sandbox{}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/sandboxes/" + pathID(id) + "/connect", in: in, out: sb}); err != nil {
		return nil, err
	}
	if sb.SandboxID == "" {
		sb.SandboxID = id
	}
	sb.c = c
	return sb, nil
}

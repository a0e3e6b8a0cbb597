package daemonproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// killAllRounds is how often KillAll lists and kills while sandboxes remain.
const killAllRounds = 5

// Do sends an authenticated control-API request (X-API-Key; a JSON
// Content-Type when body is not nil) to the daemon.
func (p *Proc) Do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", p.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return http.DefaultClient.Do(req)
}

// SandboxIDs lists the ids of every running or paused sandbox (up to 100).
func (p *Proc) SandboxIDs(ctx context.Context) ([]string, error) {
	resp, err := p.Do(ctx, http.MethodGet, "/v2/sandboxes?state=running,paused&limit=100", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("daemonproc: list sandboxes: %s", resp.Status)
	}
	var list []struct {
		SandboxID string `json:"sandboxID"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("daemonproc: list sandboxes: %w", err)
	}
	ids := make([]string, 0, len(list))
	for _, s := range list {
		ids = append(ids, s.SandboxID)
	}
	return ids, nil
}

// KillAll kills every sandbox the daemon knows (running or paused), listing
// again while some remain, a few rounds at most. A sandbox already gone is
// not an error; one that fails to die is, as is a failed listing.
func (p *Proc) KillAll(ctx context.Context) error {
	var errs []error
	for range killAllRounds {
		ids, err := p.SandboxIDs(ctx)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if len(ids) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, id := range ids {
			if err := p.kill(ctx, id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// kill deletes one sandbox; 404 counts as done.
func (p *Proc) kill(ctx context.Context, id string) error {
	resp, err := p.Do(ctx, http.MethodDelete, "/sandboxes/"+id, nil)
	if err != nil {
		return fmt.Errorf("daemonproc: kill sandbox %s: %w", id, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("daemonproc: kill sandbox %s: %s", id, resp.Status)
	}
	return nil
}

package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Volume is a named volume: persistent storage sandboxes mount. Token
// authenticates its content API (VolumeFiles); List leaves it empty.
type Volume struct {
	ID    string `json:"volumeID"`
	Name  string `json:"name"`
	Token string `json:"token,omitempty"`
}

// VolumeEntry is one file, directory or symlink of a volume.
type VolumeEntry struct {
	Name   string    `json:"name"`
	Path   string    `json:"path"`
	Type   string    `json:"type"`
	Size   int64     `json:"size"`
	Mode   uint32    `json:"mode"`
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Atime  time.Time `json:"atime"`
	Mtime  time.Time `json:"mtime"`
	Ctime  time.Time `json:"ctime"`
	Target string    `json:"target,omitempty"`
}

// CreateVolume makes an empty volume (POST /volumes).
func (c *Client) CreateVolume(ctx context.Context, name string) (*Volume, error) {
	var v Volume
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/volumes", in: map[string]string{"name": name}, out: &v})
	return &v, err
}

// ListVolumes lists every volume (GET /volumes), without tokens.
func (c *Client) ListVolumes(ctx context.Context) ([]Volume, error) {
	var vs []Volume
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/volumes", out: &vs})
	return vs, err
}

// GetVolume returns volume id with its token (GET /volumes/{id}).
func (c *Client) GetVolume(ctx context.Context, id string) (*Volume, error) {
	var v Volume
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/volumes/" + pathID(id), out: &v})
	return &v, err
}

// DeleteVolume removes volume id and its files; one a sandbox mounts is
// refused (409).
func (c *Client) DeleteVolume(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/volumes/" + pathID(id)})
	return err
}

// VolumeFiles reaches one volume's content API with the volume's token.
type VolumeFiles struct {
	c *Client
	v Volume
}

// VolumeFiles returns the content API of v (v.Token must be set: use
// GetVolume or CreateVolume's result).
func (c *Client) VolumeFiles(v Volume) *VolumeFiles { return &VolumeFiles{c: c, v: v} }

// content sends one content-API request with the volume's bearer token.
func (f *VolumeFiles) content(ctx context.Context, method, op string, q url.Values, body io.Reader) (*http.Response, error) {
	u := f.c.baseURL + "/volumecontent/" + pathID(f.v.ID) + "/" + op + "?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+f.v.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := f.c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, fmt.Errorf("%s %s %s: %w", method, op, q.Get("path"), decodeError(resp))
	}
	return resp, nil
}

// contentJSON sends a content-API request and decodes its JSON answer.
func (f *VolumeFiles) contentJSON(ctx context.Context, method, op string, q url.Values, body io.Reader, out any) error {
	resp, err := f.content(ctx, method, op, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	return decodeJSON(resp.Body, out)
}

// List lists directory p, depth levels deep (0: 1).
func (f *VolumeFiles) List(ctx context.Context, p string, depth int) ([]VolumeEntry, error) {
	q := url.Values{"path": {p}}
	if depth > 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var out []VolumeEntry
	return out, f.contentJSON(ctx, http.MethodGet, "dir", q, nil, &out)
}

// MakeDir creates directory p (parents: the missing ones above it too).
func (f *VolumeFiles) MakeDir(ctx context.Context, p string, parents bool) (*VolumeEntry, error) {
	var e VolumeEntry
	q := url.Values{"path": {p}, "force": {strconv.FormatBool(parents)}}
	return &e, f.contentJSON(ctx, http.MethodPost, "dir", q, nil, &e)
}

// Stat describes p.
func (f *VolumeFiles) Stat(ctx context.Context, p string) (*VolumeEntry, error) {
	var e VolumeEntry
	return &e, f.contentJSON(ctx, http.MethodGet, "path", url.Values{"path": {p}}, nil, &e)
}

// Remove deletes p (a directory with everything in it).
func (f *VolumeFiles) Remove(ctx context.Context, p string) error {
	return f.contentJSON(ctx, http.MethodDelete, "path", url.Values{"path": {p}}, nil, nil)
}

// Read streams file p; the caller closes the reader.
func (f *VolumeFiles) Read(ctx context.Context, p string) (io.ReadCloser, error) {
	resp, err := f.content(ctx, http.MethodGet, "file", url.Values{"path": {p}}, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Write streams r into file p, replacing it (and making missing parents).
func (f *VolumeFiles) Write(ctx context.Context, p string, r io.Reader) (*VolumeEntry, error) {
	var e VolumeEntry
	return &e, f.contentJSON(ctx, http.MethodPut, "file", url.Values{"path": {p}}, r, &e)
}

// decodeJSON decodes one JSON value from r into out.
func decodeJSON(r io.Reader, out any) error {
	if err := json.NewDecoder(r).Decode(out); err != nil {
		return fmt.Errorf("decode volume answer: %w", err)
	}
	return nil
}

package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls the forkbox control API. It is safe for concurrent use.
type Client struct {
	baseURL    string
	sandboxURL string
	apiKey     string
	hc         *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client used for every request (control API and
// data plane). The default is http.DefaultClient. A Timeout on it also bounds
// Exec streams, so prefer context deadlines.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.hc = hc }
}

// WithSandboxURL sets the base URL of the data-plane proxy (E2B_SANDBOX_URL
// in E2B terms). It defaults to the API base URL, where forkbox serves both.
func WithSandboxURL(u string) Option {
	return func(c *Client) { c.sandboxURL = strings.TrimRight(u, "/") }
}

// New returns a Client for the API at baseURL (for example
// "http://127.0.0.1:3000") that authenticates with apiKey. An empty apiKey
// sends no X-API-Key header.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{
		baseURL: strings.TrimRight(baseURL, "/"),
		apiKey:  apiKey,
		hc:      http.DefaultClient,
	}
	for _, o := range opts {
		o(c)
	}
	if c.sandboxURL == "" {
		c.sandboxURL = c.baseURL
	}
	return c
}

// BaseURL returns the control API base URL.
func (c *Client) BaseURL() string { return c.baseURL }

// SandboxURL returns the data-plane base URL.
func (c *Client) SandboxURL() string { return c.sandboxURL }

// call is one REST request: method and path, optional query, optional JSON
// body in, optional JSON answer out.
type call struct {
	method string
	path   string
	query  url.Values
	in     any
	out    any
}

// do sends a control request and decodes a 2xx answer into cl.out. It returns
// the response headers, which carry the paging token.
func (c *Client) do(ctx context.Context, cl call) (http.Header, error) {
	u := c.baseURL + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	var body io.Reader
	if cl.in != nil {
		b, err := json.Marshal(cl.in)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", cl.method, cl.path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", cl.method, cl.path, err)
	}
	if cl.in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		req.Header.Set("X-API-Key", c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", cl.method, cl.path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.Header, fmt.Errorf("%s %s: %w", cl.method, cl.path, decodeError(resp))
	}
	if cl.out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Header, nil
	}
	if raw, ok := cl.out.(*[]byte); ok { // a text answer (a patch)
		*raw, err = io.ReadAll(resp.Body)
		return resp.Header, err
	}
	if err := json.NewDecoder(resp.Body).Decode(cl.out); err != nil && err != io.EOF {
		return resp.Header, fmt.Errorf("decode %s %s: %w", cl.method, cl.path, err)
	}
	return resp.Header, nil
}

// seconds converts a duration to whole seconds for the wire, rounding up so a
// sub-second timeout does not become "no timeout".
func seconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

// pathID escapes one path segment (ids never contain '/', but names given by
// callers might).
func pathID(id string) string { return url.PathEscape(id) }

// Package oci pulls container images from any OCI (or Docker v2) registry and
// unpacks them into a root filesystem.
//
// The registry protocol, manifests, indexes and configs are handled by
// go-containerregistry; this package adds what forkbox needs around it:
// per-registry mirrors (like containerd's hosts mirrors), a plain-HTTP policy
// (loopback always, other hosts only when named insecure), a content-addressed
// on-disk store of layer blobs (each verified against its digest and stored
// once however many images share it), progress callbacks, and a careful
// layer extractor (ApplyLayer) that keeps every path inside the rootfs.
package oci

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Options configures a Client.
type Options struct {
	// CacheDir holds the content-addressed blob store (blobs/sha256/<hex>).
	CacheDir string
	// Mirrors maps a registry host ("docker.io", "ghcr.io", "host:5000") to
	// the base URL of a mirror tried before it ("http://127.0.0.1:5000").
	// One mirror per host; see ParseMirror for the flag form.
	Mirrors map[string]string
	// Insecure names registry hosts that may be spoken to over plain HTTP
	// or HTTPS without certificate verification. Loopback registries always
	// may (as Docker allows); every other host needs to be listed here.
	Insecure []string
	// Platform selects the manifest of a multi-platform index; the zero
	// value means linux on the host's architecture.
	Platform v1.Platform
	// DialContext replaces the dialer of the HTTP transport (tests route
	// made-up host names to a loopback registry with it).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Jobs bounds the layers downloaded at once (default 3).
	Jobs int
	// BlobCacheBytes bounds the layer blobs kept once no pull or unpack
	// uses them (Release): the least recently used go first. They are
	// only a cache — an unpacked image is a layer of the image store —
	// so a later pull of the same layers skips the download. 0 keeps
	// none; negative keeps all.
	BlobCacheBytes int64
	// OwnsCache says no other process uses CacheDir (the daemon holds its
	// data directory's lock), so every unfinished download found at start
	// was cut short by a killed process and is removed at once; without
	// it only those older than an hour go, as another pull may be writing.
	OwnsCache bool
}

// Client pulls images. It is safe for concurrent use.
type Client struct {
	opts      Options
	store     *blobStore
	inUse     pins              // blobs of pulls not yet released
	mirrors   map[string]mirror // key: normalised registry host
	insecure  map[string]bool   // normalised host → allowed over plain HTTP
	transport http.RoundTripper
}

// mirror is one parsed Options.Mirrors entry.
type mirror struct {
	host     string // host[:port] of the mirror
	plain    bool   // the URL's scheme is http
	upstream string // the registry it stands in for, as configured
}

// New returns a Client, creating the cache directory.
func New(opts Options) (*Client, error) {
	if opts.CacheDir == "" {
		return nil, fmt.Errorf("oci: no cache directory: %w", errdefs.ErrInvalidArgument)
	}
	if opts.Platform.OS == "" {
		opts.Platform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	}
	if opts.Jobs <= 0 {
		opts.Jobs = 3
	}
	store, err := newBlobStore(opts.CacheDir, opts.OwnsCache)
	if err != nil {
		return nil, err
	}
	// Images were unpacked into a cache of their own (rootfs/) before
	// they became layers of the image store; nothing reads it now.
	os.RemoveAll(filepath.Join(opts.CacheDir, "rootfs"))
	c := &Client{opts: opts, store: store, mirrors: map[string]mirror{}, insecure: map[string]bool{}}
	for _, h := range opts.Insecure {
		c.insecure[normaliseHost(h)] = true
	}
	for host, raw := range opts.Mirrors {
		m, err := parseMirrorURL(raw)
		if err != nil {
			return nil, fmt.Errorf("oci: mirror for %s: %w", host, err)
		}
		m.upstream = host
		c.mirrors[normaliseHost(host)] = m
		if m.plain {
			// An http:// mirror URL is the operator's explicit consent.
			c.insecure[normaliseHost(m.host)] = true
		}
	}
	c.transport = c.newTransport()
	c.trim()
	return c, nil
}

// ParseMirror splits the flag form "docker.io=http://127.0.0.1:5000" into
// the registry host and the mirror URL, checking both.
func ParseMirror(s string) (host, mirrorURL string, err error) {
	host, mirrorURL, ok := strings.Cut(s, "=")
	if !ok || host == "" || mirrorURL == "" {
		return "", "", fmt.Errorf("registry mirror %q: want HOST=URL (docker.io=http://127.0.0.1:5000): %w", s, errdefs.ErrInvalidArgument)
	}
	if _, err := name.NewRegistry(host); err != nil {
		return "", "", fmt.Errorf("registry mirror %q: host: %v: %w", s, err, errdefs.ErrInvalidArgument)
	}
	if _, err := parseMirrorURL(mirrorURL); err != nil {
		return "", "", fmt.Errorf("registry mirror %q: %w", s, err)
	}
	return host, mirrorURL, nil
}

func parseMirrorURL(raw string) (mirror, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return mirror{}, fmt.Errorf("mirror URL %q: want http(s)://host[:port]: %w", raw, errdefs.ErrInvalidArgument)
	}
	if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
		return mirror{}, fmt.Errorf("mirror URL %q: only scheme and host[:port] are supported: %w", raw, errdefs.ErrInvalidArgument)
	}
	return mirror{host: u.Host, plain: u.Scheme == "http"}, nil
}

// normaliseHost maps the spellings of a registry host to the one name
// go-containerregistry uses ("docker.io" → "index.docker.io").
func normaliseHost(h string) string {
	r, err := name.NewRegistry(h)
	if err != nil {
		return strings.ToLower(h)
	}
	return r.RegistryStr()
}

// isLoopback reports whether host[:port] names this machine.
func isLoopback(hostport string) bool {
	h := hostport
	if sh, _, err := net.SplitHostPort(hostport); err == nil {
		h = sh
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// plainAllowed reports whether host may be spoken to without TLS.
func (c *Client) plainAllowed(host string) bool {
	return isLoopback(host) || c.insecure[normaliseHost(host)]
}

// newTransport builds the HTTP transport every request goes through. It
// enforces the plain-HTTP policy itself, because go-containerregistry falls
// back to HTTP for private (RFC 1918) addresses on its own.
func (c *Client) newTransport() http.RoundTripper {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	dial := c.opts.DialContext
	if dial == nil {
		dial = dialer.DialContext
	}
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dial,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	skipVerify := base.Clone()
	skipVerify.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // only for hosts named insecure
	return &policyTransport{c: c, verified: base, unverified: skipVerify}
}

// policyTransport refuses plain HTTP to hosts that are neither loopback nor
// named insecure, and skips certificate checks only for insecure hosts.
type policyTransport struct {
	c                    *Client
	verified, unverified http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *policyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	if req.URL.Scheme == "http" && !t.c.plainAllowed(host) {
		return nil, fmt.Errorf("plain HTTP to registry %s refused (not loopback; allow it with --insecure-registry %s): %w",
			host, host, errdefs.ErrForbidden)
	}
	if req.URL.Scheme == "https" && t.c.insecure[normaliseHost(host)] {
		return t.unverified.RoundTrip(req)
	}
	return t.verified.RoundTrip(req)
}

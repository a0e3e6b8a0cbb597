package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Auth is a username and password (or token) for a registry.
type Auth struct {
	Username string
	Password string
}

// Progress reports how far one layer's download is. Done == Total when the
// layer is complete; Cached says it was in the store already.
type Progress struct {
	Layer  string // digest of the compressed layer
	Index  int    // 0-based position in the image
	Done   int64
	Total  int64
	Cached bool
}

// PullOptions are the per-pull settings.
type PullOptions struct {
	// Auth, when set, is sent to the registry (and to its mirror).
	Auth *Auth
	// Progress, when set, is called as layers download. Calls are
	// serialised; it must return quickly.
	Progress func(Progress)
}

// Image is a pulled image whose layers are all in the client's store.
type Image struct {
	Ref    string  `json:"ref"`    // the reference as asked for
	Source string  `json:"source"` // what was fetched: registry/repo@digest
	Digest string  `json:"digest"` // manifest digest
	Config Config  `json:"config"`
	Layers []Layer `json:"layers"`
}

// Layer is one layer of an Image.
type Layer struct {
	Digest    string `json:"digest"` // of the compressed blob
	DiffID    string `json:"diffID"` // of the uncompressed tar
	Size      int64  `json:"size"`
	MediaType string `json:"mediaType"`
}

// Config is the part of an image's config a sandbox honours.
type Config struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// StartCommand is the process the image runs by default: Entrypoint
// followed by Cmd, as a container runtime would start it.
func (c Config) StartCommand() []string {
	return append(append([]string{}, c.Entrypoint...), c.Cmd...)
}

// Size is the sum of the compressed layer sizes.
func (img *Image) Size() int64 {
	var n int64
	for _, l := range img.Layers {
		n += l.Size
	}
	return n
}

// Pull resolves ref (Docker's reference syntax; docker.io and :latest by
// default), fetches its manifest (choosing the client's platform from an
// index) and config, and stores every layer not stored yet, verifying each
// against its digest. The image's blobs stay until Release (call it once
// the image is unpacked). A mirror configured for the registry is tried first;
// only when the mirror is unreachable does the pull fall back to the
// registry itself, because a mirror's definite answer (not found, denied)
// is the registry's answer.
func (c *Client) Pull(ctx context.Context, ref string, po PullOptions) (*Image, error) {
	eps, err := c.endpoints(ref)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i, ep := range eps {
		img, err := c.pullFrom(ctx, ep, po)
		if err == nil {
			img.Ref = ref
			return img, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || !errors.Is(err, errdefs.ErrUnavailable) || i == len(eps)-1 {
			break
		}
		slog.WarnContext(ctx, "oci: mirror failed, trying the registry itself", "ref", ep.String(), "err", err)
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("pull %s: %w", ref, errors.Join(errs...))
}

// endpoints lists the references to try for ref: its mirror's, then its own.
func (c *Client) endpoints(ref string) ([]name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %v: %w", ref, err, errdefs.ErrInvalidArgument)
	}
	host := r.Context().RegistryStr()
	var eps []name.Reference
	if m, ok := c.mirrors[host]; ok {
		mr, err := rehost(r, m.host, c.nameOpts(m.host)...)
		if err != nil {
			return nil, fmt.Errorf("image reference %q on mirror %s: %v: %w", ref, m.host, err, errdefs.ErrInvalidArgument)
		}
		eps = append(eps, mr)
	}
	if opts := c.nameOpts(host); len(opts) > 0 {
		if r, err = name.ParseReference(ref, opts...); err != nil {
			return nil, fmt.Errorf("image reference %q: %v: %w", ref, err, errdefs.ErrInvalidArgument)
		}
	}
	return append(eps, r), nil
}

// nameOpts marks a host insecure for go-containerregistry, which then also
// tries plain HTTP; the transport still enforces the policy.
func (c *Client) nameOpts(host string) []name.Option {
	if c.plainAllowed(host) {
		return []name.Option{name.Insecure}
	}
	return nil
}

// rehost moves r's repository onto another registry host, keeping its tag
// or digest.
func rehost(r name.Reference, host string, opts ...name.Option) (name.Reference, error) {
	repo := host + "/" + r.Context().RepositoryStr()
	if d, ok := r.(name.Digest); ok {
		return name.NewDigest(repo+"@"+d.DigestStr(), opts...)
	}
	return name.NewTag(repo+":"+r.Identifier(), opts...)
}

// pullFrom pulls from one endpoint.
func (c *Client) pullFrom(ctx context.Context, r name.Reference, po PullOptions) (*Image, error) {
	auth := authn.Anonymous
	if po.Auth != nil && (po.Auth.Username != "" || po.Auth.Password != "") {
		auth = authn.FromConfig(authn.AuthConfig{Username: po.Auth.Username, Password: po.Auth.Password})
	}
	ropts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(c.transport),
		remote.WithPlatform(c.opts.Platform),
		remote.WithAuth(auth),
		remote.WithUserAgent("forkbox"),
		// Fail fast on a dead registry: three tries within about a second.
		remote.WithRetryBackoff(remote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 3}),
	}
	rimg, err := remote.Image(r, ropts...)
	if err != nil {
		return nil, classify(r.String(), po.Auth != nil, err)
	}
	img, layers, err := c.describe(r, rimg)
	if err != nil {
		return nil, classify(r.String(), po.Auth != nil, err)
	}
	// The blobs are the pull's until Release: the cache's trimming leaves
	// them alone, found or fetched.
	c.inUse.add(img)
	if err := c.fetchLayers(ctx, layers, po.Progress); err != nil {
		c.Release(img)
		return nil, classify(r.String(), po.Auth != nil, err)
	}
	return img, nil
}

// describe reads the manifest and config of rimg into an Image.
func (c *Client) describe(r name.Reference, rimg v1.Image) (*Image, []v1.Layer, error) {
	digest, err := rimg.Digest()
	if err != nil {
		return nil, nil, err
	}
	cf, err := rimg.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	if cf.OS != "" && (cf.OS != c.opts.Platform.OS || cf.Architecture != c.opts.Platform.Architecture) {
		return nil, nil, fmt.Errorf("image %s is for %s/%s, this host runs %s/%s: %w", r, cf.OS, cf.Architecture,
			c.opts.Platform.OS, c.opts.Platform.Architecture, errdefs.ErrInvalidArgument)
	}
	layers, err := rimg.Layers()
	if err != nil {
		return nil, nil, err
	}
	img := &Image{
		Source: r.Context().Name() + "@" + digest.String(),
		Digest: digest.String(),
		Config: Config{Env: cf.Config.Env, WorkingDir: cf.Config.WorkingDir, User: cf.Config.User,
			Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd},
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, nil, err
		}
		diff, err := l.DiffID()
		if err != nil {
			return nil, nil, err
		}
		size, err := l.Size()
		if err != nil {
			return nil, nil, err
		}
		mt, err := l.MediaType()
		if err != nil {
			return nil, nil, err
		}
		img.Layers = append(img.Layers, Layer{Digest: d.String(), DiffID: diff.String(), Size: size, MediaType: string(mt)})
	}
	return img, layers, nil
}

// fetchLayers stores every layer the store lacks, a few at a time.
func (c *Client) fetchLayers(ctx context.Context, layers []v1.Layer, progress func(Progress)) error {
	var mu sync.Mutex
	report := func(p Progress) {
		if progress != nil {
			mu.Lock()
			progress(p)
			mu.Unlock()
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.Jobs)
	for i, l := range layers {
		g.Go(func() error { return c.fetchLayer(ctx, i, l, report) })
	}
	return g.Wait()
}

func (c *Client) fetchLayer(ctx context.Context, i int, l v1.Layer, report func(Progress)) error {
	d, err := l.Digest()
	if err != nil {
		return err
	}
	size, err := l.Size()
	if err != nil {
		return err
	}
	if c.store.has(d.String()) {
		report(Progress{Layer: d.String(), Index: i, Done: size, Total: size, Cached: true})
		return nil
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	pr := &progressReader{r: rc, p: Progress{Layer: d.String(), Index: i, Total: size}, report: report}
	report(pr.p)
	return c.store.put(ctx, d.String(), size, pr)
}

// progressReader reports the bytes read through it.
type progressReader struct {
	r      io.Reader
	p      Progress
	report func(Progress)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.p.Done += int64(n)
		p.report(p.p)
	}
	return n, err
}

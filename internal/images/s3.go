package images

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// This file is the object-store backend's connection: where the bucket is,
// how errors of the S3 API map onto errdefs classes, and the few object
// operations the backend is made of. The layout under the prefix:
//
//	blobs/sha256/<hex>                    a file's bytes, by digest
//	images/<kind>/<id>                    a Store image's manifest
//	content/<kind>/<key>                  a ContentStore entry's manifest
//	holds/<kind>/<key>/<holder kind>/<id> a marker: that holder holds that entry
//	holders/<holder kind>/<id>/<kind>/<key> the same marker, indexed by holder
//
// A manifest lists an image's files and the blobs that hold them; it is
// written after every blob is in place, so it is the commit point.

// ObjectStoreConfig says where the object store is and how to reach it.
type ObjectStoreConfig struct {
	// URL is s3://bucket/prefix (the prefix may be empty).
	URL string
	// Endpoint is the S3 API's base URL (http://host:port or https://…);
	// empty means AWS's regional endpoint.
	Endpoint  string
	Region    string
	AccessKey string
	SecretKey string
	// CacheDir is the local cache's directory, CacheSize its limit in bytes.
	CacheDir  string
	CacheSize int64
	// CachePin is how long a Store image stays in the cache, whatever the
	// limit, after it was opened or written (a restore reads it within
	// that). Zero means 15 minutes.
	CachePin time.Duration
	// BlobGrace is how old an unreferenced blob must be before Collect
	// removes it: a blob uploaded for a manifest another node has not
	// written yet is younger. Zero means an hour.
	BlobGrace time.Duration
	// Node names this daemon in the references it records (default: the
	// host name and CacheDir), so it can tell its own from other nodes'.
	Node string
	// OpTimeout bounds one object operation's attempts (minio-go retries
	// inside it); zero means a minute.
	OpTimeout time.Duration
	Logger    *slog.Logger
}

// ObjectStoreFromEnv fills the endpoint, region and credentials from the
// environment as the AWS tools name them.
func ObjectStoreFromEnv(c ObjectStoreConfig) ObjectStoreConfig {
	c.Endpoint = os.Getenv("AWS_ENDPOINT_URL")
	c.Region = os.Getenv("AWS_REGION")
	if c.Region == "" {
		c.Region = os.Getenv("AWS_DEFAULT_REGION")
	}
	c.AccessKey = os.Getenv("AWS_ACCESS_KEY_ID")
	c.SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
	return c
}

// ParseObjectStoreURL splits s3://bucket/prefix, refusing anything else
// with the reason.
func ParseObjectStoreURL(raw string) (bucket, prefix string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("object store URL %q: %v: %w", raw, err, errdefs.ErrInvalidArgument)
	}
	bad := func(why string) error {
		return fmt.Errorf("object store URL %q: %s (want s3://bucket/prefix): %w", raw, why, errdefs.ErrInvalidArgument)
	}
	switch {
	case u.Scheme != "s3":
		return "", "", bad("the scheme must be s3")
	case u.Host == "":
		return "", "", bad("no bucket")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", "", bad("credentials, queries and fragments go in the environment, not the URL")
	case len(u.Host) < 3 || len(u.Host) > 63 || strings.Trim(u.Host, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "":
		return "", "", bad("a bucket name is 3 to 63 lower-case letters, digits, dots and hyphens")
	}
	prefix = strings.Trim(path.Clean("/"+u.Path), "/")
	if strings.Contains(u.Path, "..") {
		return "", "", bad("the prefix may not contain ..")
	}
	return u.Host, prefix, nil
}

// bucket is one connection to the object store, shared by the two stores.
type bucket struct {
	cl      *minio.Client
	name    string
	prefix  string
	timeout time.Duration
	log     *slog.Logger
}

func dialBucket(c ObjectStoreConfig) (*bucket, error) {
	name, prefix, err := ParseObjectStoreURL(c.URL)
	if err != nil {
		return nil, err
	}
	host, secure := "s3.amazonaws.com", true
	if c.Region != "" {
		host = "s3." + c.Region + ".amazonaws.com"
	}
	if c.Endpoint != "" {
		e, err := url.Parse(c.Endpoint)
		if err != nil || e.Host == "" || (e.Scheme != "http" && e.Scheme != "https") {
			return nil, fmt.Errorf("AWS_ENDPOINT_URL %q: want http(s)://host[:port]: %w", c.Endpoint, errdefs.ErrInvalidArgument)
		}
		host, secure = e.Host, e.Scheme == "https"
	}
	if c.AccessKey == "" || c.SecretKey == "" {
		return nil, fmt.Errorf("object store: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set: %w", errdefs.ErrInvalidArgument)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
	cl, err := minio.New(host, &minio.Options{
		Creds: credentials.NewStaticV4(c.AccessKey, c.SecretKey, ""), Secure: secure,
		Region: c.Region, Transport: tr, BucketLookup: minio.BucketLookupPath, MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("object store: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	timeout := c.OpTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &bucket{cl: cl, name: name, prefix: prefix, timeout: timeout, log: log}, nil
}

// check makes sure the bucket answers and exists, within the op timeout.
func (b *bucket) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	ok, err := b.cl.BucketExists(ctx, b.name)
	if err != nil {
		return b.err("reach bucket "+b.name, err)
	}
	if !ok {
		return fmt.Errorf("object store: bucket %q does not exist: %w", b.name, errdefs.ErrNotFound)
	}
	return nil
}

func (b *bucket) key(parts ...string) string {
	k := path.Join(parts...)
	if b.prefix != "" {
		k = b.prefix + "/" + k
	}
	return k
}

// rel strips the prefix from a listed key.
func (b *bucket) rel(key string) string {
	if b.prefix == "" {
		return key
	}
	return strings.TrimPrefix(key, b.prefix+"/")
}

// err classes an S3 failure: a missing object is ErrNotFound, and a store
// that does not answer, answers 5xx or refuses the daemon's credentials
// ErrUnavailable, so the API says 503 (the client's own key is not what is
// wrong) and a retry may work once the store is back.
func (b *bucket) err(op string, err error) error {
	if err == nil {
		return nil
	}
	r := minio.ToErrorResponse(err)
	switch {
	case r.Code == "NoSuchKey" || r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket":
		return fmt.Errorf("object store: %s: %w", op, errdefs.ErrNotFound)
	case r.Code == "AccessDenied" || r.Code == "InvalidAccessKeyId" || r.Code == "SignatureDoesNotMatch":
		return fmt.Errorf("object store unavailable: %s: it refused the credentials: %s: %w", op, r.Message, errdefs.ErrUnavailable)
	case r.StatusCode >= 400 && r.StatusCode < 500 && r.Code != "NoSuchBucket":
		return fmt.Errorf("object store: %s: %v: %w", op, err, errdefs.ErrInternal)
	}
	return fmt.Errorf("object store unavailable: %s: %v: %w", op, err, errdefs.ErrUnavailable)
}

// opCtx bounds one object operation.
func (b *bucket) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.timeout)
}

// getSmall reads a small object (a manifest) whole.
func (b *bucket) getSmall(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := b.opCtx(ctx)
	defer cancel()
	obj, err := b.cl.GetObject(ctx, b.name, b.key(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, b.err("get "+key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(io.LimitReader(obj, 64<<20))
	if err != nil {
		return nil, b.err("get "+key, err)
	}
	return data, nil
}

// putSmall writes a small object (a manifest, a marker) in one request.
func (b *bucket) putSmall(ctx context.Context, key string, data []byte) error {
	ctx, cancel := b.opCtx(ctx)
	defer cancel()
	_, err := b.cl.PutObject(ctx, b.name, b.key(key), strings.NewReader(string(data)), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true})
	return b.err("put "+key, err)
}

// stat returns an object's info; ErrNotFound when there is none.
func (b *bucket) stat(ctx context.Context, key string) (minio.ObjectInfo, error) {
	ctx, cancel := b.opCtx(ctx)
	defer cancel()
	info, err := b.cl.StatObject(ctx, b.name, b.key(key), minio.StatObjectOptions{})
	return info, b.err("stat "+key, err)
}

// remove deletes an object; a missing one is not an error.
func (b *bucket) remove(ctx context.Context, key string) error {
	ctx, cancel := b.opCtx(ctx)
	defer cancel()
	err := b.err("remove "+key, b.cl.RemoveObject(ctx, b.name, b.key(key), minio.RemoveObjectOptions{}))
	if errdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// list returns the objects under dir (keys relative to the prefix).
func (b *bucket) list(ctx context.Context, dir string) ([]minio.ObjectInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*b.timeout)
	defer cancel()
	var out []minio.ObjectInfo
	for o := range b.cl.ListObjects(ctx, b.name, minio.ListObjectsOptions{Prefix: b.key(dir) + "/", Recursive: true}) {
		if o.Err != nil {
			return nil, b.err("list "+dir, o.Err)
		}
		o.Key = b.rel(o.Key)
		out = append(out, o)
	}
	return out, nil
}

// exists reports whether an object is there (an unreachable store is an
// error, not a no).
func (b *bucket) exists(ctx context.Context, key string) (bool, error) {
	_, err := b.stat(ctx, key)
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// ErrChecksum is what a download whose bytes do not hash to what the
// manifest says fails with: the image is not handed out.
var ErrChecksum = fmt.Errorf("checksum mismatch: %w", errdefs.ErrInternal)

// modTime is when the object at key was last written.
func (b *bucket) modTime(ctx context.Context, key string) (time.Time, error) {
	info, err := b.stat(ctx, key)
	if err != nil {
		return time.Time{}, err
	}
	return info.LastModified, nil
}

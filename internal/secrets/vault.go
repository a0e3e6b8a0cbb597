package secrets

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"golang.org/x/net/http/httpguts"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/store"
)

// Limits of E2B's SecretMetadata, and of a value: the egress proxy puts it
// into a header, whose value netpolicy caps at 8 KiB.
const (
	MaxMetadataEntries  = 32
	MaxMetadataKeyLen   = 128
	MaxMetadataValueLen = 1024
	MaxMetadataBytes    = 8192
	MaxValueLen         = 8 << 10
	MaxNameLen          = 256
	// IDPrefix starts every secret id; names may not (E2B reserves it).
	IDPrefix = "sec_"
)

// Records is where secrets are kept (*store.Store).
type Records interface {
	CreateSecret(ctx context.Context, sec *store.Secret) error
	GetSecret(ctx context.Context, ref string) (*store.Secret, error)
	UpdateSecret(ctx context.Context, ref string, sealed []byte, metadata map[string]string, now time.Time) (*store.Secret, error)
	DeleteSecret(ctx context.Context, ref string) error
	ListSecrets(ctx context.Context, limit int, next string) ([]*store.Secret, string, error)
}

// Info is a secret's metadata: everything but its value.
type Info struct {
	ID        string
	Name      string
	Version   int64
	Metadata  map[string]string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Vault creates, updates and resolves secrets. It is safe for concurrent use.
type Vault struct {
	recs Records
	seal *sealer
	log  *slog.Logger
	now  func() time.Time
}

// New returns a vault over recs sealing with key (32 bytes); now nil means
// time.Now.
func New(recs Records, key []byte, log *slog.Logger, now func() time.Time) (*Vault, error) {
	s, err := newSealer(key)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	return &Vault{recs: recs, seal: s, log: log, now: now}, nil
}

// Create stores a new secret whose first version is value.
func (v *Vault) Create(ctx context.Context, name, value string, metadata map[string]string) (*Info, error) {
	name = strings.ToLower(name)
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := checkValue(value); err != nil {
		return nil, err
	}
	if err := checkMetadata(metadata); err != nil {
		return nil, err
	}
	id := newID()
	sealed, err := v.seal.seal(id, []byte(value))
	if err != nil {
		return nil, err
	}
	now := v.now().UTC()
	rec := &store.Secret{ID: id, Name: name, Version: 1, Metadata: nonNil(metadata), Sealed: sealed, CreatedAt: now, UpdatedAt: now}
	if err := v.recs.CreateSecret(ctx, rec); err != nil {
		return nil, err
	}
	v.log.Info("secret created", "secret", id, "name", name)
	return infoOf(rec), nil
}

// Update stores value as the next version of the secret whose id or name is
// ref; metadata, when not nil, replaces the stored metadata.
func (v *Vault) Update(ctx context.Context, ref, value string, metadata map[string]string) (*Info, error) {
	if err := checkValue(value); err != nil {
		return nil, err
	}
	if err := checkMetadata(metadata); err != nil {
		return nil, err
	}
	cur, err := v.recs.GetSecret(ctx, strings.ToLower(ref))
	if err != nil {
		return nil, err
	}
	sealed, err := v.seal.seal(cur.ID, []byte(value))
	if err != nil {
		return nil, err
	}
	rec, err := v.recs.UpdateSecret(ctx, cur.ID, sealed, metadata, v.now().UTC())
	if err != nil {
		return nil, err
	}
	v.log.Info("secret updated", "secret", rec.ID, "name", rec.Name, "version", rec.Version)
	return infoOf(rec), nil
}

// Get returns the metadata of the secret whose id or name is ref.
func (v *Vault) Get(ctx context.Context, ref string) (*Info, error) {
	rec, err := v.recs.GetSecret(ctx, strings.ToLower(ref))
	if err != nil {
		return nil, err
	}
	return infoOf(rec), nil
}

// Delete removes the secret whose id or name is ref and every version of it.
func (v *Vault) Delete(ctx context.Context, ref string) error {
	rec, err := v.recs.GetSecret(ctx, strings.ToLower(ref))
	if err != nil {
		return err
	}
	if err := v.recs.DeleteSecret(ctx, rec.ID); err != nil {
		return err
	}
	v.log.Info("secret deleted", "secret", rec.ID, "name", rec.Name)
	return nil
}

// List returns a page of secrets in creation order (limit 1..1000, 0: 100)
// and the next page's token.
func (v *Vault) List(ctx context.Context, limit int, next string) ([]*Info, string, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > 1000 {
		return nil, "", fmt.Errorf("limit %d: want 1..1000: %w", limit, errdefs.ErrInvalidArgument)
	}
	recs, tok, err := v.recs.ListSecrets(ctx, limit, next)
	if err != nil {
		return nil, "", err
	}
	out := make([]*Info, len(recs))
	for i, r := range recs {
		out[i] = infoOf(r)
	}
	return out, tok, nil
}

// Resolve returns the current value of the secret named name (the egress
// proxy's `${e2b.secrets.NAME}`). A deleted or unknown secret is
// ErrNotFound.
func (v *Vault) Resolve(ctx context.Context, name string) (string, error) {
	rec, err := v.recs.GetSecret(ctx, strings.ToLower(name))
	if err != nil {
		return "", err
	}
	b, err := v.seal.open(rec.ID, rec.Sealed)
	if err != nil {
		return "", fmt.Errorf("secret %s: %v: %w", rec.Name, err, errdefs.ErrInternal)
	}
	return string(b), nil
}

// Exists reports whether every name is a secret; the error names the first
// that is not, as an invalid argument (a rule may not name an unknown
// secret).
func (v *Vault) Exists(ctx context.Context, names []string) error {
	for _, n := range names {
		if _, err := v.recs.GetSecret(ctx, strings.ToLower(n)); err != nil {
			if errdefs.IsNotFound(err) {
				return fmt.Errorf("network rules name the secret %q, which does not exist (create it with Secret.create or `forkbox secret create`): %w", n, errdefs.ErrInvalidArgument)
			}
			return err
		}
	}
	return nil
}

func infoOf(r *store.Secret) *Info {
	return &Info{ID: r.ID, Name: r.Name, Version: r.Version, Metadata: nonNil(r.Metadata), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newID() string {
	b := make([]byte, 10)
	rand.Read(b)
	return IDPrefix + idEncoding.EncodeToString(b)
}

// checkName applies E2B's rules: a name is interpolated into the
// `${e2b.secrets.NAME}` placeholder, so no braces or control characters.
func checkName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("secret name %q: %s: %w", name, why, errdefs.ErrInvalidArgument)
	}
	switch {
	case name == "":
		return bad("a name is required")
	case len(name) > MaxNameLen:
		return bad(fmt.Sprintf("longer than %d bytes", MaxNameLen))
	case strings.HasPrefix(name, IDPrefix):
		return bad("the sec_ prefix is reserved for secret ids")
	case strings.ContainsAny(name, "{}") || strings.ContainsFunc(name, unicode.IsControl):
		return bad("a name cannot contain '{', '}' or control characters")
	}
	return nil
}

func checkValue(value string) error {
	if value == "" || len(value) > MaxValueLen || !httpguts.ValidHeaderFieldValue(value) {
		return fmt.Errorf("secret value: want 1 to %d bytes without CR, LF or other control characters (it is sent as a header value): %w", MaxValueLen, errdefs.ErrInvalidArgument)
	}
	return nil
}

func checkMetadata(md map[string]string) error {
	if len(md) > MaxMetadataEntries {
		return fmt.Errorf("metadata has %d entries, the limit is %d: %w", len(md), MaxMetadataEntries, errdefs.ErrInvalidArgument)
	}
	total := 0
	for k, val := range md {
		if k == "" || len(k) > MaxMetadataKeyLen || len(val) > MaxMetadataValueLen {
			return fmt.Errorf("metadata %q: keys are 1 to %d bytes, values at most %d: %w", k, MaxMetadataKeyLen, MaxMetadataValueLen, errdefs.ErrInvalidArgument)
		}
		total += len(k) + len(val)
	}
	if total > MaxMetadataBytes {
		return fmt.Errorf("metadata is %d bytes, the limit is %d: %w", total, MaxMetadataBytes, errdefs.ErrInvalidArgument)
	}
	return nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Package identity makes forkbox an OIDC issuer of workload identity
// tokens (E2B's iam.tokens, type JWT-SVID): short-lived ES256 JWTs whose
// subject names a sandbox, its template and team, which the egress proxy
// puts where a rule says `${e2b.identity.tokens.NAME}`. Relying parties
// verify them with any OIDC library against the discovery document and
// JWKS this package serves. Signing keys live in the data dir and rotate;
// a retired key's public half stays published until every token it
// signed has expired.
package identity

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Defaults of Config.
const (
	DefaultTokenTTL    = 10 * time.Minute
	DefaultRotateEvery = 24 * time.Hour
	// KeyFile is the signing keys' file under the data dir.
	KeyFile = "oidc-keys.json"
	// Team is the team every sandbox belongs to: forkbox has one.
	Team = "default"
)

// Config configures an Issuer. Issuer and Dir are required.
type Config struct {
	// Issuer is the issuer URL (iss), where relying parties find
	// /.well-known/openid-configuration.
	Issuer string
	// Dir holds the signing keys (KeyFile).
	Dir string
	// TokenTTL is a token's lifetime (default 10 min); a cached token is
	// renewed once less than a third of it is left.
	TokenTTL time.Duration
	// RotateEvery is how long one key signs (default 24 h).
	RotateEvery time.Duration
	Logger      *slog.Logger
	Now         func() time.Time
}

// Subject is who a token speaks for.
type Subject struct {
	SandboxID, TemplateID, Team string
}

// Issuer mints tokens and serves the discovery document and JWKS. It is
// safe for concurrent use.
type Issuer struct {
	cfg   Config
	trust string // the SPIFFE trust domain: the issuer's host name
	path  string
	mu    sync.Mutex
	keys  []*signingKey // guarded by mu; the last is the current one
	cache map[string]cached
}

type cached struct {
	token string
	exp   time.Time
}

// New loads (or makes) the signing keys and returns the issuer.
func New(cfg Config) (*Issuer, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--oidc-issuer %q: want an http(s) URL without query or fragment", cfg.Issuer)
	}
	cfg.Issuer = strings.TrimSuffix(cfg.Issuer, "/")
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.RotateEvery <= 0 {
		cfg.RotateEvery = DefaultRotateEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	is := &Issuer{cfg: cfg, trust: u.Hostname(), path: filepath.Join(cfg.Dir, KeyFile), cache: map[string]cached{}}
	if is.keys, err = loadKeys(is.path); err != nil {
		return nil, err
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if _, err := is.current(); err != nil {
		return nil, err
	}
	return is, nil
}

// URL is the issuer URL (iss).
func (is *Issuer) URL() string { return is.cfg.Issuer }

// SubjectID is the token subject of s: a SPIFFE ID in the issuer's trust
// domain naming the team, the template and the sandbox.
func (is *Issuer) SubjectID(s Subject) string {
	return "spiffe://" + is.trust + "/team/" + url.PathEscape(s.Team) +
		"/template/" + url.PathEscape(s.TemplateID) + "/sandbox/" + url.PathEscape(s.SandboxID)
}

// Token returns a JWT for s with audience aud, valid for at least two
// thirds of TokenTTL: a cached one while it is, else a new one.
func (is *Issuer) Token(ctx context.Context, s Subject, aud string) (string, error) {
	if aud == "" {
		return "", fmt.Errorf("a token needs an audience")
	}
	now := is.cfg.Now()
	key := s.SandboxID + "\x00" + s.TemplateID + "\x00" + s.Team + "\x00" + aud
	is.mu.Lock()
	defer is.mu.Unlock()
	if c, ok := is.cache[key]; ok && c.exp.Sub(now) > is.cfg.TokenTTL*2/3 {
		return c.token, nil
	}
	k, err := is.current()
	if err != nil {
		return "", err
	}
	tok, exp, err := is.sign(k, s, aud, now)
	if err != nil {
		return "", err
	}
	if len(is.cache) >= 4096 {
		for ck, c := range is.cache {
			if !c.exp.After(now) {
				delete(is.cache, ck)
			}
		}
	}
	is.cache[key] = cached{token: tok, exp: exp}
	return tok, nil
}

// claims are the token's: the registered ones plus the sandbox's names,
// so a relying party can authorise on them without parsing sub.
type claims struct {
	jwt.Claims
	SandboxID  string `json:"sandbox_id"`
	TemplateID string `json:"template_id"`
	TeamID     string `json:"team_id"`
}

func (is *Issuer) sign(k *signingKey, s Subject, aud string, now time.Time) (string, time.Time, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.ID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", time.Time{}, err
	}
	exp := now.Add(is.cfg.TokenTTL)
	jti := make([]byte, 12)
	rand.Read(jti)
	c := claims{
		Claims: jwt.Claims{Issuer: is.cfg.Issuer, Subject: is.SubjectID(s), Audience: jwt.Audience{aud},
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-30 * time.Second)),
			Expiry: jwt.NewNumericDate(exp), ID: hex.EncodeToString(jti)},
		SandboxID: s.SandboxID, TemplateID: s.TemplateID, TeamID: s.Team,
	}
	tok, err := jwt.Signed(signer).Claims(c).Serialize()
	return tok, exp, err
}

// current returns the signing key, rotating first if it is due and
// dropping retired keys no unexpired token can name. is.mu is held.
func (is *Issuer) current() (*signingKey, error) {
	now := is.cfg.Now()
	changed := false
	kept := is.keys[:0]
	for _, k := range is.keys {
		// A key retired at R signed its last token at R, valid until R+TTL.
		if !k.Retired.IsZero() && now.Sub(k.Retired) > is.cfg.TokenTTL+time.Minute {
			changed = true
			is.cfg.Logger.Info("oidc signing key dropped from the JWKS", "kid", k.ID)
			continue
		}
		kept = append(kept, k)
	}
	is.keys = kept
	if n := len(is.keys); n == 0 || now.Sub(is.keys[n-1].Created) >= is.cfg.RotateEvery {
		k, err := newKey(now)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			is.keys[n-1].Retired = now.UTC()
		}
		is.keys = append(is.keys, k)
		changed = true
		is.cfg.Logger.Info("oidc signing key made", "kid", k.ID, "rotates", now.Add(is.cfg.RotateEvery).UTC())
	}
	if changed {
		if err := saveKeys(is.path, is.keys); err != nil {
			return nil, fmt.Errorf("oidc keys: %w", err)
		}
	}
	return is.keys[len(is.keys)-1], nil
}

// JWKS returns the public keys tokens may be signed with.
func (is *Issuer) JWKS() (jose.JSONWebKeySet, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if _, err := is.current(); err != nil {
		return jose.JSONWebKeySet{}, err
	}
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(is.keys))}
	for _, k := range is.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.ID, Algorithm: string(jose.ES256), Use: "sig"})
	}
	return set, nil
}

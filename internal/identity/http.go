package identity

import (
	"encoding/json"
	"net/http"
)

// Paths of the issuer's public documents.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/.well-known/jwks.json"
)

// discovery is the OpenID Provider Metadata a relying party reads: what
// verifying a token needs (issuer, keys, algorithm), no more; forkbox
// has no authorization or token endpoint (its tokens reach relying
// parties through the egress proxy only).
type discovery struct {
	Issuer        string   `json:"issuer"`
	JWKSURI       string   `json:"jwks_uri"`
	ResponseTypes []string `json:"response_types_supported"`
	SubjectTypes  []string `json:"subject_types_supported"`
	SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
	Claims        []string `json:"claims_supported"`
}

// ServeHTTP answers the discovery document and the JWKS; no API key
// guards them (relying parties have none).
func (is *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var v any
	switch r.URL.Path {
	case DiscoveryPath:
		v = discovery{Issuer: is.cfg.Issuer, JWKSURI: is.cfg.Issuer + JWKSPath,
			ResponseTypes: []string{"id_token"}, SubjectTypes: []string{"public"}, SigningAlgs: []string{"ES256"},
			Claims: []string{"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "sandbox_id", "template_id", "team_id"}}
	case JWKSPath:
		set, err := is.JWKS()
		if err != nil {
			is.cfg.Logger.Error("oidc jwks", "err", err)
			http.Error(w, "signing keys unavailable", http.StatusInternalServerError)
			return
		}
		v = set
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=60")
	json.NewEncoder(w).Encode(v)
}

package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Secret is a secret's metadata (E2B's Secret): never its value.
type Secret struct {
	SecretID string `json:"secretID"`
	Name     string `json:"name"`
	// CurrentVersion is 1 for a new secret, one more per update.
	CurrentVersion int64             `json:"currentVersion"`
	Metadata       map[string]string `json:"metadata"`
	CreatedAt      time.Time         `json:"createdAt"`
	UpdatedAt      time.Time         `json:"updatedAt"`
}

// SecretPlaceholder is what a network rule's header holds to have the
// egress proxy put the current value of the secret name there (E2B's
// Secret.fill).
func SecretPlaceholder(name string) string { return "${e2b.secrets." + name + "}" }

// TokenPlaceholder is what a network rule's header holds to have the
// egress proxy put the sandbox's workload token name (CreateOptions.IAM)
// there.
func TokenPlaceholder(name string) string { return "${e2b.identity.tokens." + name + "}" }

type secretRequest struct {
	Name     string            `json:"name,omitempty"`
	Value    string            `json:"value"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// CreateSecret stores a new secret (POST /secrets); its name is
// lower-cased, the value is write-only.
func (c *Client) CreateSecret(ctx context.Context, name, value string, metadata map[string]string) (*Secret, error) {
	out := &Secret{}
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/secrets",
		in: secretRequest{Name: name, Value: value, Metadata: metadata}, out: out})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateSecret stores value as the next version of the secret with id or
// name ref; metadata, when not nil, replaces the stored metadata.
func (c *Client) UpdateSecret(ctx context.Context, ref, value string, metadata map[string]string) (*Secret, error) {
	out := &Secret{}
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/secrets/" + pathID(ref),
		in: secretRequest{Value: value, Metadata: metadata}, out: out})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetSecret returns the metadata of the secret with id or name ref.
func (c *Client) GetSecret(ctx context.Context, ref string) (*Secret, error) {
	out := &Secret{}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/secrets/" + pathID(ref), out: out}); err != nil {
		return nil, err
	}
	return out, nil
}

// SecretExists reports whether a secret with id or name ref exists.
func (c *Client) SecretExists(ctx context.Context, ref string) (bool, error) {
	_, err := c.GetSecret(ctx, ref)
	if IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// DeleteSecret removes the secret with id or name ref and all its versions.
func (c *Client) DeleteSecret(ctx context.Context, ref string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/secrets/" + pathID(ref)})
	return err
}

// ListSecrets returns a page of secrets in creation order (limit 0: the
// server's 100) and the token of the next page ("" on the last).
func (c *Client) ListSecrets(ctx context.Context, limit int, nextToken string) ([]Secret, string, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if nextToken != "" {
		q.Set("nextToken", nextToken)
	}
	var out []Secret
	h, err := c.do(ctx, call{method: http.MethodGet, path: "/secrets", query: q, out: &out})
	if err != nil {
		return nil, "", err
	}
	return out, h.Get("X-Next-Token"), nil
}

// IAMToken is a workload identity token a sandbox's rules may name (E2B's
// SandboxIamToken): a JWT for Audience, of type JWT-SVID.
type IAMToken struct {
	Audience  string `json:"audience"`
	TokenType string `json:"tokenType"`
}

// IAM is a sandbox's workload identity (E2B's iam): its tokens by name.
type IAM struct {
	Tokens map[string]IAMToken `json:"tokens,omitempty"`
}

// JWTSVID is the token type forkbox issues.
const JWTSVID = "JWT-SVID"

package netpolicy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Placeholder kinds a rule's header value may hold, filled in by the
// egress proxy per request (E2B's Secret.fill and iam.tokens): the value
// never enters the sandbox nor its record.
const (
	// KindSecret is `${e2b.secrets.NAME}`: the secret's current value.
	KindSecret = "e2b.secrets."
	// KindToken is `${e2b.identity.tokens.NAME}`: a workload identity
	// token of the sandbox for the audience iam.tokens.NAME names.
	KindToken = "e2b.identity.tokens."
)

const placeholderStart = "${e2b."

// Ref is one placeholder: its kind (KindSecret or KindToken) and name.
type Ref struct {
	Kind, Name string
}

// HasPlaceholder reports whether v may hold a placeholder (the proxy's
// fast path: most header values hold none).
func HasPlaceholder(v string) bool { return strings.Contains(v, placeholderStart) }

// Expand returns v with every placeholder replaced by what fill returns
// for it; fill's error (or a malformed placeholder) stops the expansion.
func Expand(v string, fill func(Ref) (string, error)) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(v, placeholderStart)
		if i < 0 {
			b.WriteString(v)
			return b.String(), nil
		}
		b.WriteString(v[:i])
		ref, n, err := parseRef(v[i:])
		if err != nil {
			return "", err
		}
		val, err := fill(ref)
		if err != nil {
			return "", err
		}
		b.WriteString(val)
		v = v[i+n:]
	}
}

// parseRef reads the placeholder at the start of s and its length.
func parseRef(s string) (Ref, int, error) {
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return Ref{}, 0, fmt.Errorf("placeholder %q has no closing '}': %w", s, errdefs.ErrInvalidArgument)
	}
	body := s[2:end]
	for _, kind := range []string{KindSecret, KindToken} {
		if name, ok := strings.CutPrefix(body, kind); ok && name != "" {
			return Ref{Kind: kind, Name: name}, end + 1, nil
		}
	}
	return Ref{}, 0, fmt.Errorf("placeholder %q: want ${e2b.secrets.NAME} or ${e2b.identity.tokens.NAME}: %w", s[:end+1], errdefs.ErrInvalidArgument)
}

// Refs returns the secrets and token names r's header transforms name,
// sorted and unique; a malformed placeholder is an invalid argument.
func (r Rules) Refs() (secrets, tokens []string, err error) {
	sec, tok := map[string]bool{}, map[string]bool{}
	for _, rules := range r.Rules {
		for _, rule := range rules {
			if rule.Transform == nil {
				continue
			}
			for _, v := range rule.Transform.Headers {
				_, err := Expand(v, func(ref Ref) (string, error) {
					if ref.Kind == KindSecret {
						sec[strings.ToLower(ref.Name)] = true
					} else {
						tok[ref.Name] = true
					}
					return "", nil
				})
				if err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(sec)), slices.Sorted(maps.Keys(tok)), nil
}

// IAMToken is E2B's SandboxIamToken: a workload token a rule may name.
type IAMToken struct {
	Audience  string `json:"audience"`
	TokenType string `json:"tokenType"`
}

// IAM is E2B's SandboxIam: the sandbox's named workload tokens.
type IAM struct {
	Tokens map[string]IAMToken `json:"tokens,omitempty"`
}

// TokenTypeJWTSVID is the one token type forkbox issues.
const TokenTypeJWTSVID = "JWT-SVID"

// CheckIAM validates E2B's iam: names usable in a placeholder, an
// audience, the JWT-SVID type.
func CheckIAM(iam *IAM) error {
	if iam == nil {
		return nil
	}
	if len(iam.Tokens) > MaxRuleDomains {
		return fmt.Errorf("iam.tokens has %d tokens, the limit is %d: %w", len(iam.Tokens), MaxRuleDomains, errdefs.ErrInvalidArgument)
	}
	for name, t := range iam.Tokens {
		if name == "" || strings.ContainsAny(name, "{}") || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("iam.tokens %q: a token name cannot be empty or contain '{', '}' or control characters: %w", name, errdefs.ErrInvalidArgument)
		}
		if t.Audience == "" || len(t.Audience) > 1024 {
			return fmt.Errorf("iam.tokens %q: an audience of 1 to 1024 bytes is required: %w", name, errdefs.ErrInvalidArgument)
		}
		if t.TokenType != TokenTypeJWTSVID {
			return fmt.Errorf("iam.tokens %q: tokenType %q: forkbox issues %s only: %w", name, t.TokenType, TokenTypeJWTSVID, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// CheckTokenRefs fails for a token r names that iam does not define.
func CheckTokenRefs(r Rules, iam *IAM) error {
	_, tokens, err := r.Refs()
	if err != nil {
		return err
	}
	for _, t := range tokens {
		if iam == nil || iam.Tokens[t] == (IAMToken{}) {
			return fmt.Errorf("network rules name the iam token %q, which the sandbox's iam.tokens does not define: %w", t, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

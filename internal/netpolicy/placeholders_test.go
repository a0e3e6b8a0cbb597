package netpolicy

import (
	"errors"
	"slices"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

func TestExpand(t *testing.T) {
	fill := func(r Ref) (string, error) {
		if r.Name == "gone" {
			return "", errors.New("gone")
		}
		return "<" + r.Kind + r.Name + ">", nil
	}
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{"plain", "plain", false},
		{"Bearer ${e2b.secrets.k}", "Bearer <e2b.secrets.k>", false},
		{"${e2b.identity.tokens.aws}", "<e2b.identity.tokens.aws>", false},
		{"a ${e2b.secrets.x} b ${e2b.secrets.y}", "a <e2b.secrets.x> b <e2b.secrets.y>", false},
		{"${other} $e2b ${e2b", "${other} $e2b ${e2b", false},
		{"${e2b.secrets.x", "", true},
		{"${e2b.secrets.}", "", true},
		{"${e2b.volumes.x}", "", true},
		{"${e2b.secrets.gone}", "", true},
	} {
		got, err := Expand(tc.in, fill)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("Expand(%q) = %q, %v", tc.in, got, err)
		}
	}
	if got, err := Expand("${not e2b} ok", fill); err != nil || got != "${not e2b} ok" {
		t.Errorf("other ${…} is text: %q %v", got, err)
	}
}

func TestRefsAndIAM(t *testing.T) {
	r := Rules{Rules: map[string][]Rule{
		"a.test": {{Transform: &Transform{Headers: map[string]string{"Authorization": "Bearer ${e2b.secrets.Key}", "X": "${e2b.identity.tokens.aws}"}}}},
		"b.test": {{}, {Transform: &Transform{Headers: map[string]string{"Y": "${e2b.secrets.key} ${e2b.secrets.other}"}}}},
	}}
	sec, tok, err := r.Refs()
	if err != nil || !slices.Equal(sec, []string{"key", "other"}) || !slices.Equal(tok, []string{"aws"}) {
		t.Fatalf("Refs = %v %v %v", sec, tok, err)
	}
	iam := &IAM{Tokens: map[string]IAMToken{"aws": {Audience: "sts.amazonaws.com", TokenType: TokenTypeJWTSVID}}}
	if err := CheckTokenRefs(r, iam); err != nil {
		t.Errorf("defined token refused: %v", err)
	}
	for _, bad := range []*IAM{nil, {Tokens: map[string]IAMToken{"gcp": {Audience: "x", TokenType: TokenTypeJWTSVID}}}} {
		if err := CheckTokenRefs(r, bad); !errdefs.IsInvalidArgument(err) {
			t.Errorf("undefined token with %+v: %v", bad, err)
		}
	}
	for _, bad := range []IAM{
		{Tokens: map[string]IAMToken{"": {Audience: "a", TokenType: TokenTypeJWTSVID}}},
		{Tokens: map[string]IAMToken{"a{b": {Audience: "a", TokenType: TokenTypeJWTSVID}}},
		{Tokens: map[string]IAMToken{"a": {TokenType: TokenTypeJWTSVID}}},
		{Tokens: map[string]IAMToken{"a": {Audience: "a", TokenType: "OIDC"}}},
	} {
		if err := CheckIAM(&bad); !errdefs.IsInvalidArgument(err) {
			t.Errorf("CheckIAM(%+v) = %v", bad, err)
		}
	}
	// A malformed placeholder is refused when the rules compile.
	if _, _, err := Compile(Rules{Rules: map[string][]Rule{"a.test": {{Transform: &Transform{Headers: map[string]string{"A": "${e2b.secrets.x"}}}}}}, true, nil); !errdefs.IsInvalidArgument(err) {
		t.Errorf("malformed placeholder compiled: %v", err)
	}
}

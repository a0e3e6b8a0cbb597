package runtime

import (
	"context"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// NetworkPolicer is the optional ability to replace the egress policy of a
// running sandbox in place. Connections already established stay up;
// new ones follow the new policy. Backends that implement it also enforce
// Spec.Egress from the moment a sandbox's network exists.
type NetworkPolicer interface {
	SetNetworkPolicy(ctx context.Context, id string, p netpolicy.Policy) error
}

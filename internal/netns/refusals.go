package netns

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// What the kernel refuses is counted and sampled per sandbox, in the
// kernel: the named counters g<N> (a forbidden range: the guard) and
// x<N> (denyOut) count every dropped packet, and the dynamic sets rg<N>
// and rx<N> keep each refused destination for refusedTTL, so a reader
// polling them sees every refused destination once per burst without a
// packet ever reaching user space. The guard is shared by all sandboxes;
// its drops reach the sandbox's own chain rg<N> through the verdict map
// refuseMap, keyed by host-side link like the policy map.
const (
	refuseMap = "refuse"
	// refusedTTL is how long a refused destination stays in its set: a
	// sandbox hammering one address is sampled once per TTL.
	refusedTTL = netpolicy.SampleTTL
	// refusedSize caps each set; when full, new destinations go unsampled
	// (still counted and dropped).
	refusedSize = 64
)

func guardCounterName(slot int) string { return fmt.Sprintf("g%d", slot) }
func denyCounterName(slot int) string  { return fmt.Sprintf("x%d", slot) }
func guardSampleName(slot int) string  { return fmt.Sprintf("rg%d", slot) }
func denySampleName(slot int) string   { return fmt.Sprintf("rx%d", slot) }
func refuseChainName(slot int) string  { return fmt.Sprintf("refuse%d", slot) }

// addRefusalObjects queues l's counters, sample sets and refuse chain.
// Existing counters and samples are kept (a policy change does not reset
// what was counted).
func (m *Manager) addRefusalObjects(c *nftables.Conn, t *nftables.Table, l Lease) error {
	for _, name := range []string{guardCounterName(l.Slot), denyCounterName(l.Slot)} {
		c.AddObj(&nftables.NamedObj{Table: t, Name: name, Type: nftables.ObjTypeCounter, Obj: &expr.Counter{}})
	}
	for _, name := range []string{guardSampleName(l.Slot), denySampleName(l.Slot)} {
		s := sampleSet(t, name)
		if err := c.AddSet(s, nil); err != nil {
			return fmt.Errorf("nftables set %s: %w", name, err)
		}
	}
	ch := c.AddChain(&nftables.Chain{Name: refuseChainName(l.Slot), Table: t})
	c.FlushChain(ch)
	for _, e := range countAndSample(guardCounterName(l.Slot), guardSampleName(l.Slot)) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: e})
	}
	vm := &nftables.Set{Table: t, Name: refuseMap, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict, IsMap: true}
	el := nftables.SetElement{Key: ifname(l.HostLink), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: ch.Name}}
	if err := c.SetAddElements(vm, []nftables.SetElement{el}); err != nil {
		return fmt.Errorf("nftables map %s: %w", refuseMap, err)
	}
	return nil
}

func sampleSet(t *nftables.Table, name string) *nftables.Set {
	return &nftables.Set{Table: t, Name: name, KeyType: nftables.TypeIPAddr,
		Dynamic: true, HasTimeout: true, Timeout: refusedTTL, Size: refusedSize}
}

// countAndSample is the two rules that end a refusal: count and sample the
// destination, then drop. They are two rules because a full sample set
// ends its rule early: the drop must not depend on it.
func countAndSample(counter, set string) [][]expr.Any {
	return [][]expr.Any{{
		&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: counter},
		&expr.Payload{DestRegister: 2, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Dynset{SrcRegKey: 2, SetName: set, Operation: unix.NFT_DYNSET_OP_ADD, Timeout: refusedTTL},
	}, drop()}
}

// guardDrop is the guard's rules for one forbidden range: to the
// sandbox's refuse chain, or (a link without one) a plain drop.
func guardDrop(p netip.Prefix) [][]expr.Any {
	toRefuse := cat(daddrIn(p), []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: refuseMap, DestRegister: 0, IsDestRegSet: true},
	})
	return [][]expr.Any{toRefuse, cat(daddrIn(p), drop())}
}

// refusalStep is one transaction of removing l's refusal objects.
type refusalStep struct {
	what string
	f    func(c *nftables.Conn) error
}

// removeRefusalSteps delete l's refusal objects, users before used: the
// map element, the chain, then the sets and counters its rules name.
func removeRefusalSteps(t *nftables.Table, l Lease) []refusalStep {
	steps := []refusalStep{{refuseMap, func(c *nftables.Conn) error {
		vm := &nftables.Set{Table: t, Name: refuseMap, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict, IsMap: true}
		return c.SetDeleteElements(vm, []nftables.SetElement{{Key: ifname(l.HostLink)}})
	}}, {refuseChainName(l.Slot), func(c *nftables.Conn) error {
		ch := &nftables.Chain{Name: refuseChainName(l.Slot), Table: t}
		c.FlushChain(ch)
		c.DelChain(ch)
		return nil
	}}}
	return steps
}

// removeRefusalData deletes l's sample sets and counters; it runs after
// the sandbox's chains, whose rules name them, are gone.
func removeRefusalData(t *nftables.Table, l Lease) []refusalStep {
	var steps []refusalStep
	for _, name := range []string{guardSampleName(l.Slot), denySampleName(l.Slot)} {
		steps = append(steps, refusalStep{name, func(c *nftables.Conn) error {
			c.DelSet(&nftables.Set{Table: t, Name: name})
			return nil
		}})
	}
	for _, name := range []string{guardCounterName(l.Slot), denyCounterName(l.Slot)} {
		steps = append(steps, refusalStep{name, func(c *nftables.Conn) error {
			c.DeleteObject(&nftables.NamedObj{Table: t, Name: name, Type: nftables.ObjTypeCounter})
			return nil
		}})
	}
	return steps
}

// Refusals reads what the kernel refused each sandbox with a network:
// packet totals by reason and the destinations sampled lately, each with
// the rule of the sandbox's current policy that refuses it.
func (m *Manager) Refusals() ([]netpolicy.KernelCount, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	t := m.table()
	objs, err := c.GetNamedObjects(t)
	if err != nil {
		return nil, fmt.Errorf("nftables counters: %w", err)
	}
	packets := map[string]uint64{}
	for _, o := range objs {
		if no, ok := o.(*nftables.NamedObj); ok {
			if ctr, ok := no.Obj.(*expr.Counter); ok {
				packets[no.Name] = ctr.Packets
			}
		}
	}
	var out []netpolicy.KernelCount
	for _, l := range m.Leases() {
		for _, k := range []struct{ reason, counter, set string }{
			{netpolicy.ReasonForbidden, guardCounterName(l.Slot), guardSampleName(l.Slot)},
			{netpolicy.ReasonDenyOut, denyCounterName(l.Slot), denySampleName(l.Slot)},
		} {
			kc := netpolicy.KernelCount{ID: l.ID, Reason: k.reason, Packets: packets[k.counter]}
			kc.Recent = m.sampled(c, t, k.set, l)
			out = append(out, kc)
		}
	}
	return out, nil
}

// sampled lists the destinations in sample set name as denials of l.
func (m *Manager) sampled(c *nftables.Conn, t *nftables.Table, name string, l Lease) []netpolicy.Denial {
	els, err := c.GetSetElements(sampleSet(t, name))
	if err != nil {
		if !strings.Contains(err.Error(), "no such file") {
			m.log.Debug("nftables sample set", "set", name, "err", err)
		}
		return nil
	}
	var out []netpolicy.Denial
	now := time.Now()
	for _, e := range els {
		if len(e.Key) != 4 {
			continue
		}
		a := netip.AddrFrom4([4]byte(e.Key))
		reason, rule := l.Policy.DenyRule(a, m.cfg.Opened)
		if reason == "" {
			reason, rule = netpolicy.ReasonDenyOut, "refused under an earlier policy"
		}
		at := now
		if e.Timeout > 0 && e.Expires > 0 {
			at = now.Add(e.Expires - e.Timeout)
		}
		out = append(out, netpolicy.Denial{Time: at, Layer: netpolicy.LayerKernel,
			Destination: a.String(), Reason: reason, Rule: rule})
	}
	return out
}

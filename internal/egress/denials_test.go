package egress

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// TestDenialsCountsAndEvents: kernel totals count by their growth (and
// from zero after a reset), a sample becomes one event until it is
// sampled anew, proxy refusals count one each, events are capped per
// window while counts are not, and the metric sums by layer and reason.
func TestDenialsCountsAndEvents(t *testing.T) {
	d := NewDenials()
	var events []string
	d.SetSink(func(id string, den netpolicy.Denial) { events = append(events, id+" "+den.Destination) })
	t0 := time.Now()
	sample := netpolicy.Denial{Time: t0, Layer: netpolicy.LayerKernel, Destination: "198.51.100.7", Reason: netpolicy.ReasonDenyOut, Rule: "denyOut 198.51.100.7/32"}
	read := func(packets uint64, recent ...netpolicy.Denial) []netpolicy.KernelCount {
		return []netpolicy.KernelCount{{ID: "a", Reason: netpolicy.ReasonDenyOut, Packets: packets, Recent: recent}}
	}
	d.Kernel(read(3, sample))
	d.Kernel(read(5, sample)) // same sample: no new event
	d.Kernel(read(2))         // reset: counts 2
	again := sample
	again.Time = t0.Add(31 * time.Second)
	d.Kernel(read(4, again)) // sampled anew
	if got := d.Report("a"); got.Total != 9 || got.ByReason[netpolicy.ReasonDenyOut] != 9 || len(got.Recent) != 2 {
		t.Errorf("report = %+v, want 9 denyOut and 2 recent", got)
	}
	if strings.Join(events, ",") != "a 198.51.100.7,a 198.51.100.7" {
		t.Errorf("events = %q", events)
	}
	events = nil
	for i := range 30 {
		d.Proxy("b", netpolicy.Denial{Time: t0.Add(time.Duration(i) * time.Millisecond), Layer: netpolicy.LayerProxy,
			Destination: "198.51.100.8:443", Name: "x.test", Reason: netpolicy.ReasonName})
	}
	if got := d.Report("b"); got.Total != 30 || len(got.Recent) != 30 {
		t.Errorf("proxy report = total %d, %d recent; want 30, 30", got.Total, len(got.Recent))
	}
	if len(events) != eventBurst {
		t.Errorf("%d events in one window, want %d", len(events), eventBurst)
	}
	if v := testutil.ToFloat64(d.metric.WithLabelValues(netpolicy.LayerKernel, netpolicy.ReasonDenyOut)); v != 9 {
		t.Errorf("kernel metric = %v, want 9", v)
	}
	if v := testutil.ToFloat64(d.metric.WithLabelValues(netpolicy.LayerProxy, netpolicy.ReasonName)); v != 30 {
		t.Errorf("proxy metric = %v, want 30", v)
	}
	if got := d.Report("nosuch"); got.Total != 0 || got.Recent == nil || got.ByReason == nil {
		t.Errorf("unknown sandbox report = %+v", got)
	}
}

package egress

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/forkbox/forkbox/internal/netpolicy"
)

// Bounds of what Denials keeps per sandbox.
const (
	// recentMax is how many denials a report lists.
	recentMax = 50
	// eventBurst denials per eventWindow become events; the rest of the
	// window's are only counted (and listed in the report).
	eventBurst  = 20
	eventWindow = 10 * time.Second
	// forgetAfter drops a sandbox that has had no network and no denial
	// for this long.
	forgetAfter = time.Hour
)

// Denials gathers what each sandbox was refused — the kernel's dropped
// packets (read from its per-sandbox counters and samples) and the
// proxy's refused connections — into per-sandbox counts by reason, the
// most recent denials, Prometheus counters by layer and reason, and
// rate-limited events for the sandbox's log (SetSink). It is safe for
// concurrent use.
type Denials struct {
	mu     sync.Mutex
	per    map[string]*sandboxDenials
	metric *prometheus.CounterVec
	sink   func(id string, d netpolicy.Denial)
}

type sandboxDenials struct {
	byReason map[string]uint64
	kernel   map[string]uint64    // last kernel totals, by reason
	seen     map[string]time.Time // kernel samples in the sets: reason/dst → reported at
	recent   []netpolicy.Denial
	winStart time.Time
	winCount int
	touched  time.Time
}

// NewDenials returns an empty Denials.
func NewDenials() *Denials {
	return &Denials{
		per: map[string]*sandboxDenials{},
		metric: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "forkbox_egress_denied_total",
			Help: "Refused sandbox egress, by layer (kernel: dropped packets; proxy: refused connections) and reason.",
		}, []string{"layer", "reason"}),
	}
}

// SetSink sets where denials go as events (rate-limited per sandbox);
// it is called without Denials' lock held.
func (d *Denials) SetSink(f func(id string, den netpolicy.Denial)) {
	d.mu.Lock()
	d.sink = f
	d.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (d *Denials) Describe(ch chan<- *prometheus.Desc) { d.metric.Describe(ch) }

// Collect implements prometheus.Collector.
func (d *Denials) Collect(ch chan<- prometheus.Metric) { d.metric.Collect(ch) }

// Proxy records one connection the proxy refused for sandbox id.
func (d *Denials) Proxy(id string, den netpolicy.Denial) {
	d.metric.WithLabelValues(den.Layer, den.Reason).Inc()
	d.mu.Lock()
	s := d.sandbox(id, den.Time)
	s.byReason[den.Reason]++
	emit := s.add(den)
	sink := d.sink
	d.mu.Unlock()
	if emit && sink != nil {
		sink(id, den)
	}
}

// Kernel takes a reading of every sandbox's kernel counts: the growth of
// each total is counted, each newly sampled destination recorded. A total
// below the last one (a network made anew) counts from zero.
func (d *Denials) Kernel(kcs []netpolicy.KernelCount) {
	type event struct {
		id  string
		den netpolicy.Denial
	}
	var events []event
	now := time.Now()
	present := map[string]bool{}
	d.mu.Lock()
	for _, kc := range kcs {
		present[kc.ID] = true
		s := d.sandbox(kc.ID, time.Time{})
		last := s.kernel[kc.Reason]
		delta := kc.Packets - last
		if kc.Packets < last {
			delta = kc.Packets
		}
		s.kernel[kc.Reason] = kc.Packets
		if delta > 0 {
			s.byReason[kc.Reason] += delta
			s.touched = now
			d.metric.WithLabelValues(netpolicy.LayerKernel, kc.Reason).Add(float64(delta))
		}
		for _, den := range s.newSamples(kc, now) {
			if s.add(den) {
				events = append(events, event{kc.ID, den})
			}
		}
	}
	d.forgetLocked(present, now)
	sink := d.sink
	d.mu.Unlock()
	for _, e := range events {
		if sink != nil {
			sink(e.id, e.den)
		}
	}
}

// Report returns what sandbox id was refused.
func (d *Denials) Report(id string) netpolicy.DenialReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := netpolicy.DenialReport{ByReason: map[string]uint64{}, Recent: []netpolicy.Denial{}}
	s, ok := d.per[id]
	if !ok {
		return r
	}
	for reason, n := range s.byReason {
		r.ByReason[reason] = n
		r.Total += n
	}
	r.Recent = slices.Clone(s.recent)
	return r
}

// Watch reads the kernel's counts every interval until ctx ends.
func (d *Denials) Watch(ctx context.Context, interval time.Duration, read func() ([]netpolicy.KernelCount, error), log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		kcs, err := read()
		if err != nil {
			if !failing {
				log.Warn("egress denials: cannot read the kernel's counters", "err", err)
			}
			failing = true
			continue
		}
		failing = false
		d.Kernel(kcs)
	}
}

// sandbox returns id's record, made if new.
func (d *Denials) sandbox(id string, at time.Time) *sandboxDenials {
	s, ok := d.per[id]
	if !ok {
		s = &sandboxDenials{byReason: map[string]uint64{}, kernel: map[string]uint64{}, seen: map[string]time.Time{}}
		d.per[id] = s
	}
	if !at.IsZero() {
		s.touched = at
	} else if s.touched.IsZero() {
		s.touched = time.Now()
	}
	return s
}

// forgetLocked drops sandboxes without a network and without a denial
// for forgetAfter.
func (d *Denials) forgetLocked(present map[string]bool, now time.Time) {
	for id, s := range d.per {
		if !present[id] && now.Sub(s.touched) > forgetAfter {
			delete(d.per, id)
		}
	}
}

// newSamples are kc's sampled destinations not reported yet: a sample is
// new when its destination was not in the set at the last reading, or was
// reported longer than netpolicy.SampleTTL ago (so it expired and was
// added again).
func (s *sandboxDenials) newSamples(kc netpolicy.KernelCount, at time.Time) []netpolicy.Denial {
	var out []netpolicy.Denial
	now := map[string]bool{}
	for _, den := range kc.Recent {
		key := kc.Reason + "/" + den.Destination
		now[key] = true
		if prev, ok := s.seen[key]; ok && at.Sub(prev) < netpolicy.SampleTTL {
			continue
		}
		s.seen[key] = at
		out = append(out, den)
	}
	for key := range s.seen {
		if r, _, _ := strings.Cut(key, "/"); r == kc.Reason && !now[key] {
			delete(s.seen, key)
		}
	}
	slices.SortFunc(out, func(a, b netpolicy.Denial) int { return a.Time.Compare(b.Time) })
	return out
}

// add lists den among the recent denials and reports whether it may
// become an event (eventBurst per eventWindow).
func (s *sandboxDenials) add(den netpolicy.Denial) bool {
	s.recent = append(s.recent, den)
	if n := len(s.recent); n > recentMax {
		s.recent = slices.Delete(s.recent, 0, n-recentMax)
	}
	if den.Time.Sub(s.winStart) >= eventWindow {
		s.winStart, s.winCount = den.Time, 0
	}
	s.winCount++
	return s.winCount <= eventBurst
}

package daemon

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/sandbox"
)

// errorClasses name the errdefs classes in metric labels, in the order
// errors are matched.
var errorClasses = []struct {
	err  error
	name string
}{
	{errdefs.ErrInvalidArgument, "invalid_argument"},
	{errdefs.ErrUnauthenticated, "unauthenticated"},
	{errdefs.ErrForbidden, "forbidden"},
	{errdefs.ErrNotFound, "not_found"},
	{errdefs.ErrAlreadyExists, "already_exists"},
	{errdefs.ErrConflict, "conflict"},
	{errdefs.ErrResourceExhausted, "resource_exhausted"},
	{errdefs.ErrUnavailable, "unavailable"},
	{errdefs.ErrInternal, "internal"},
}

// errorClass is err's class label; an error of no class is internal.
func errorClass(err error) string {
	for _, c := range errorClasses {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "internal"
}

// metrics is the daemon's Prometheus registry: the Manager's operations
// (an Observer), its counts at scrape time, and the Go runtime's and
// process's own collectors.
type metrics struct {
	reg       *prometheus.Registry
	ops       *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	errs      *prometheus.CounterVec
	collector *countsCollector
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "forkbox_operations_total", Help: "Sandbox operations ended, by operation and outcome (ok or error).",
		}, []string{"op", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "forkbox_operation_duration_seconds", Help: "Duration of sandbox operations, by operation and outcome.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"op", "outcome"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "forkbox_operation_errors_total", Help: "Failed sandbox operations, by operation and error class.",
		}, []string{"op", "class"}),
		collector: &countsCollector{},
	}
	m.reg.MustRegister(m.ops, m.latency, m.errs, m.collector,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, op := range sandbox.Operations {
		m.ops.WithLabelValues(string(op), "ok")
		m.ops.WithLabelValues(string(op), "error")
	}
	return m
}

// Observe implements sandbox.Observer.
func (m *metrics) Observe(op sandbox.Operation, d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
		m.errs.WithLabelValues(string(op), errorClass(err)).Inc()
	}
	m.ops.WithLabelValues(string(op), outcome).Inc()
	m.latency.WithLabelValues(string(op), outcome).Observe(d.Seconds())
}

// watch points the scrape-time counts at the Manager, if the runtime
// keeps standby containers (gVisor's) at their fill, and if images are in
// an object store at its traffic and cache.
func (m *metrics) watch(mgr *sandbox.Manager, rt any, obj *images.ObjectStore) {
	m.watchObjectStore(obj)
	m.collector.mgr = mgr
	if s, ok := rt.(interface{ StandbyFill() (int, int) }); ok {
		m.collector.standby = s.StandbyFill
	}
}

// handler serves the registry in Prometheus' text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// countsCollector reads the Manager's and the runtime's counts at scrape
// time; its sources are set once both exist.
type countsCollector struct {
	mgr     *sandbox.Manager
	standby func() (ready, perShape int) // nil: no standby
}

var (
	descSandboxes = prometheus.NewDesc("forkbox_sandboxes", "Live sandboxes by lifecycle state.", []string{"state"}, nil)
	descCommitted = prometheus.NewDesc("forkbox_committed_memory_bytes",
		"Memory limits of the sandboxes counted against --max-sandboxes: host memory committed to them.", nil, nil)
	descMax          = prometheus.NewDesc("forkbox_max_sandboxes", "The concurrent-sandbox limit (--max-sandboxes).", nil, nil)
	descPool         = prometheus.NewDesc("forkbox_pool_sandboxes", "Sandboxes restored ahead of time, by template.", []string{"template"}, nil)
	descStandby      = prometheus.NewDesc("forkbox_standby_containers", "runsc containers created ahead for restores, ready now.", nil, nil)
	descStandbyT     = prometheus.NewDesc("forkbox_standby_target", "Standby containers kept per sandbox shape (--standby).", nil, nil)
	descGateSlots    = prometheus.NewDesc("forkbox_agent_gate_slots", "Requests to agents let into sandboxes at once (--agent-request-slots; 0: no gate).", nil, nil)
	descGateWaiting  = prometheus.NewDesc("forkbox_agent_gate_waiting", "Requests to agents waiting for a slot now.", nil, nil)
	descGateAdmitted = prometheus.NewDesc("forkbox_agent_gate_requests_total", "Requests to agents let through the gate.", nil, nil)
	descGateWaited   = prometheus.NewDesc("forkbox_agent_gate_wait_seconds_total", "Time requests to agents waited for a slot, summed.", nil, nil)
	sandboxState     = []sandbox.State{sandbox.StateCreating, sandbox.StateRunning, sandbox.StatePausing, sandbox.StatePaused,
		sandbox.StateResuming, sandbox.StateSnapshotting, sandbox.StateKilling}
)

// Describe implements prometheus.Collector.
func (c *countsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSandboxes, descCommitted, descMax, descPool, descStandby, descStandbyT,
		descGateSlots, descGateWaiting, descGateAdmitted, descGateWaited} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *countsCollector) Collect(ch chan<- prometheus.Metric) {
	if c.mgr == nil {
		return
	}
	counts := c.mgr.Counts()
	for _, s := range sandboxState {
		ch <- prometheus.MustNewConstMetric(descSandboxes, prometheus.GaugeValue, float64(counts.ByState[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(counts.CommittedMemoryMB)*(1<<20))
	ch <- prometheus.MustNewConstMetric(descMax, prometheus.GaugeValue, float64(c.mgr.MaxSandboxes()))
	for tpl, n := range counts.Pool {
		ch <- prometheus.MustNewConstMetric(descPool, prometheus.GaugeValue, float64(n), tpl)
	}
	collectGate(ch, counts.Gate)
	if c.standby != nil {
		ready, target := c.standby()
		ch <- prometheus.MustNewConstMetric(descStandby, prometheus.GaugeValue, float64(ready))
		ch <- prometheus.MustNewConstMetric(descStandbyT, prometheus.GaugeValue, float64(target))
	}
}

// collectGate sends the agent gate's series.
func collectGate(ch chan<- prometheus.Metric, g sandbox.GateCounts) {
	ch <- prometheus.MustNewConstMetric(descGateSlots, prometheus.GaugeValue, float64(g.Slots))
	ch <- prometheus.MustNewConstMetric(descGateWaiting, prometheus.GaugeValue, float64(g.Waiting))
	ch <- prometheus.MustNewConstMetric(descGateAdmitted, prometheus.CounterValue, float64(g.Admitted))
	ch <- prometheus.MustNewConstMetric(descGateWaited, prometheus.CounterValue, g.Waited.Seconds())
}

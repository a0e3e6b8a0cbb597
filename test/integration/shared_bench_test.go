package integration

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/images/s3test"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// benchNodeArgs are the daemon's defaults but the heartbeat (nodeArgs
// turn the standby runsc processes off, which resumes and clones wait for).
var benchNodeArgs = []string{"--node-heartbeat", "200ms", "--node-lease", "2s"}

// hogScript holds 256 MiB of touched memory in a python process.
const hogScript = `nohup python3 -c '
b = bytearray(256 << 20)
for i in range(0, len(b), 4096): b[i] = 1
open("/tmp/hogready", "w").write("1")
import time; time.sleep(1e6)' >/dev/null 2>&1 &`

// BenchmarkRemoteResume measures resume → first output of a paused
// sandbox on the node that paused it (its image in that node's cache)
// against on another node of the cluster (handed over by a drain, its
// image downloaded from the shared object store), tiny and holding
// 256 MiB; it also reports the object store's upload and download rates
// of the pause images, as the daemons logged them.
//
//	go test -run '^$' -bench RemoteResume -benchtime 3x ./test/integration/
func BenchmarkRemoteResume(b *testing.B) {
	ctx := daemontest.Context(b)
	start := benchNodes(b)
	na, nb := start("node-a", 0), start("node-b", secondIndex(b))
	cl := map[string]*client.Client{"node-a": client.New(na.URL, na.APIKey), "node-b": client.New(nb.URL, na.APIKey)}
	logs := map[string]*daemontest.Daemon{"node-a": na, "node-b": nb}
	for _, size := range []string{"tiny", "256MiB"} {
		for _, where := range []string{"same", "other"} {
			b.Run(size+"/"+where, func(b *testing.B) {
				rb := &resumeBench{b: b, ctx: ctx, cl: cl, logs: logs}
				rb.run(size, where == "other")
			})
		}
	}
}

// resumeBench is one sub-benchmark of BenchmarkRemoteResume.
type resumeBench struct {
	b    *testing.B
	ctx  context.Context
	cl   map[string]*client.Client
	logs map[string]*daemontest.Daemon
}

func (r *resumeBench) run(size string, other bool) {
	b, ctx := r.b, r.ctx
	b.StopTimer()
	sb, err := r.cl["node-a"].CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 30 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer r.cl["node-a"].KillSandbox(context.WithoutCancel(ctx), sb.SandboxID)
	conn := r.cl["node-a"].Conn(sb.SandboxID, sb.EnvdAccessToken) // forwarded to the owner
	if size != "tiny" {
		r.shell(conn, hogScript)
		waitFor(b, time.Minute, func() bool { _, err := conn.ReadFile(ctx, "/tmp/hogready"); return err == nil })
	}
	var took []float64
	for range b.N {
		owner := r.owner(sb.SandboxID)
		r.pause(owner, sb.SandboxID)
		if other {
			owner = r.handOver(sb.SandboxID, owner)
		}
		b.StartTimer()
		t0 := time.Now()
		if _, err := r.cl[owner].Connect(ctx, sb.SandboxID, 30*time.Minute); err != nil {
			b.Fatal(err)
		}
		r.shell(r.cl[owner].Conn(sb.SandboxID, sb.EnvdAccessToken), "echo hi")
		took = append(took, float64(time.Since(t0).Microseconds())/1000)
		b.StopTimer()
	}
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2], "ms-median")
	b.ReportMetric(0, "ns/op")
	if up := rates(r.logs, "upload", sb.SandboxID); len(up) > 0 {
		b.ReportMetric(up[len(up)/2], "MiB/s-upload")
	}
	if down := rates(r.logs, "download", sb.SandboxID); len(down) > 0 {
		b.ReportMetric(down[len(down)/2], "MiB/s-download")
	}
}

func (r *resumeBench) shell(conn *client.SandboxConn, cmd string) {
	if code, err := conn.Exec(r.ctx, client.ExecOptions{Shell: cmd}); err != nil || code != 0 {
		r.b.Fatalf("%q: %d %v", cmd, code, err)
	}
}

// owner is the node id runs on, read from a listing: a GET of the sandbox
// would make a new owner fetch its image, outside the timed resume.
func (r *resumeBench) owner(id string) string {
	list, _, err := r.cl["node-a"].ListSandboxes(r.ctx, client.ListOptions{State: []string{client.StateRunning, client.StatePaused}})
	if err != nil {
		r.b.Fatal(err)
	}
	for _, sb := range list {
		if sb.SandboxID == id {
			return sb.ClientID
		}
	}
	r.b.Fatalf("sandbox %s not listed", id)
	return ""
}

// pause pauses id on owner and waits until it is paused.
func (r *resumeBench) pause(owner, id string) {
	n := strings.Count(r.logs[owner].Log(), "sandbox paused")
	if err := r.cl[owner].Pause(r.ctx, id); err != nil {
		r.b.Fatal(err)
	}
	waitFor(r.b, 2*time.Minute, func() bool { return strings.Count(r.logs[owner].Log(), "sandbox paused") > n })
}

// handOver drains owner until it handed paused sandbox id to the other
// node, and returns that node.
func (r *resumeBench) handOver(id, owner string) string {
	c := r.cl[owner]
	if _, err := c.DrainNode(r.ctx, owner); err != nil {
		r.b.Fatal(err)
	}
	defer c.UndrainNode(r.ctx, owner)
	waitFor(r.b, 30*time.Second, func() bool { return r.owner(id) != owner })
	return r.owner(id)
}

var rateLine = regexp.MustCompile(`object store: (upload|download) done" image="?image paused/(\S+?)"? bytes=(\d+) seconds=\S+ mib_per_s=([0-9.]+)`)

// rates are the MiB/s the nodes logged for op of sandbox id's pause
// images of at least 200 MiB, sorted.
func rates(logs map[string]*daemontest.Daemon, op, id string) []float64 {
	var out []float64
	for _, d := range logs {
		for _, m := range rateLine.FindAllStringSubmatch(d.Log(), -1) {
			bytes, _ := strconv.ParseInt(m[3], 10, 64)
			if m[1] == op && m[2] == id && bytes >= 200<<20 {
				v, _ := strconv.ParseFloat(m[4], 64)
				out = append(out, v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// BenchmarkClusterClone measures a strict clone ×30 of a running base
// sandbox on node a with the copies all on node a (nodes b and c drained)
// against spread over three nodes sharing one bucket. All three run on
// this one host, so spreading cannot add CPUs here: the figure is what
// spreading costs (node-to-node requests, the snapshot downloaded by b
// and c), not what it gains on three machines.
//
//	go test -run '^$' -bench ClusterClone -benchtime 2x ./test/integration/
func BenchmarkClusterClone(b *testing.B) {
	ctx := daemontest.Context(b)
	start := benchNodes(b)
	na := start("node-a", 0)
	start("node-b", secondIndex(b))
	start("node-c", secondIndex(b))
	ca := client.New(na.URL, na.APIKey)
	if _, err := ca.DrainNode(ctx, "node-b"); err != nil {
		b.Fatal(err)
	}
	if _, err := ca.DrainNode(ctx, "node-c"); err != nil {
		b.Fatal(err)
	}
	src, err := ca.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 30 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	for _, spread := range []bool{false, true} {
		name := "one-node"
		if spread {
			name = "three-nodes"
			for _, n := range []string{"node-b", "node-c"} {
				if _, err := ca.UndrainNode(ctx, n); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(name, func(b *testing.B) {
			var took []float64
			for range b.N {
				t0 := time.Now()
				res, err := ca.Clone(ctx, src.SandboxID, client.CloneOptions{Count: 30, Strict: true})
				if err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0).Seconds())
				nodes := map[string]bool{}
				for _, sb := range res.Sandboxes {
					if info, err := ca.GetSandbox(ctx, sb.SandboxID); err == nil {
						nodes[info.ClientID] = true
					}
					ca.KillSandbox(ctx, sb.SandboxID)
				}
				b.Logf("clone ×30 in %.2f s over %d node(s)", took[len(took)-1], len(nodes))
			}
			slices.Sort(took)
			b.ReportMetric(took[len(took)/2], "s-median")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchNodes starts a PostgreSQL and an S3 server for a benchmark's
// cluster and returns what starts one of its nodes on them.
func benchNodes(b *testing.B) func(node string, index int) *daemontest.Daemon {
	url := pgtest.Start(b).NewDatabase(b)
	srv := s3test.Start(b)
	return func(node string, index int) *daemontest.Daemon {
		return startClusterNode(b, url, srv, node, index, benchNodeArgs)
	}
}

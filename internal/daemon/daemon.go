// Package daemon wires forkbox's parts into the running service behind
// `forkbox serve`: store, runtime backend, base template, sandbox manager,
// HTTP server and evictor. It is the only place concrete backends are chosen.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/cluster"
	"github.com/forkbox/forkbox/internal/egress"
	"github.com/forkbox/forkbox/internal/eventlog"
	"github.com/forkbox/forkbox/internal/hostmm"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/netpolicy"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/sandbox"
	"github.com/forkbox/forkbox/internal/server"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/template"
	"github.com/forkbox/forkbox/internal/volumes"
)

// Options configure Run.
type Options struct {
	Listen      string
	DataDir     string
	TemplateDir string // default DataDir/templates
	Domain      string
	RunscPath   string
	AgentPath   string
	// TLSListen, if set, serves the same API and data plane with TLS
	// there; the certificate is TLSCert/TLSKey (PEM files) or, when
	// unset, a leaf for *.Domain issued by a CA in DataDir/tls.
	TLSListen string
	TLSCert   string
	TLSKey    string
	// PoolSize sandboxes per built-in template are kept restored ahead of
	// time so creates are a hand-over (0: none).
	PoolSize int
	// CommandPool is how many login shells each sandbox's agent keeps
	// ready for commands.run (0: the command pool is off).
	CommandPool int
	// AgentRequestSlots is how many data-plane requests to agents enter
	// sandboxes at once, the rest waiting in order (0: all at once).
	AgentRequestSlots int
	// NoMemoryWake turns off the host's memory watch that wakes each
	// sandbox's out-of-memory guard (the guard then polls at its own pace).
	NoMemoryWake bool
	// CodePrewarmJS has the code-interpreter template's image hold a
	// started JavaScript kernel (else it starts on first use).
	CodePrewarmJS bool
	// AppHugePages backs sandboxes' memory with huge pages (runsc
	// --app-huge-pages; off by default: smaller idle sandboxes).
	AppHugePages bool
	// SystrapFastPath lets sandboxes spin for syscalls (gvisor.Config).
	SystrapFastPath bool
	// PoolRecent user templates, the most recently built or created
	// from, get a pool of PoolSize too (0: none).
	PoolRecent int
	// MaxSandboxes caps the sandboxes running at once (0: from host
	// memory, see quota.go).
	MaxSandboxes int
	// CloneConcurrency bounds the parallel restores of one clone (0: the
	// manager's default).
	CloneConcurrency int
	// Standby containers per sandbox shape are kept created, not started,
	// for resumes, clones and rollbacks to restore into (0: none).
	Standby int
	// EagerRestore turns off on-demand page loading at restore
	// (gvisor.Config.EagerRestore; serve --restore-on-demand=false).
	EagerRestore bool
	// CollectDuringRestore lets the sentry's garbage collector run during
	// restores (gvisor.Config.CollectDuringRestore; serve
	// --restore-hold-gc=false).
	CollectDuringRestore bool
	// HostHugePages lets Run change the host's transparent huge page
	// settings so runsc uses huge pages (see package hostmm).
	HostHugePages bool
	// NetworkIndex separates the networks of several daemons on one host
	// (0: the default 10.201.0.0/16; n: 10.(201+n).0.0/16, 1..50).
	NetworkIndex int
	// Egress configures sandbox egress rules and the egress proxy.
	Egress EgressOptions
	// SecretsKeyFile is the AES-256 key (64 hex digits, mode 0600) secret
	// values are sealed with (--secrets-key-file); empty: made at first
	// start in <data-dir>/secrets.key.
	SecretsKeyFile string
	// NodeID names this daemon in records (the sandboxes' clientID) so
	// daemons sharing a Database tell their own apart (--node-id; empty:
	// the host name).
	NodeID string
	// Database is the postgres:// URL of a PostgreSQL shared by a cluster
	// of daemons (--database); empty: SQLite in DataDir.
	Database string
	// AdvertiseURL is where the other nodes reach this one
	// (--advertise-url; empty: http://<the bound Listen address>).
	AdvertiseURL string
	// NodeHeartbeat and NodeLease tune the node registry: how often this
	// node renews its lease, and how long a lease lasts (0: the cluster
	// package's defaults, 2 s and 10 s).
	NodeHeartbeat time.Duration
	NodeLease     time.Duration
	// OIDCIssuer is the issuer URL of workload identity tokens
	// (--oidc-issuer); empty: http://<Listen>.
	OIDCIssuer string
	// RegistryMirrors are "host=URL" mirrors tried before a registry
	// (--registry-mirror); InsecureRegistries may be spoken to over plain
	// HTTP (loopback ones always may).
	RegistryMirrors    []string
	InsecureRegistries []string
	// TemplateReadyTimeout bounds a template build's ready command
	// (--template-ready-timeout; 0: build.DefaultReadyTimeout).
	TemplateReadyTimeout time.Duration
	// OCIBlobCacheMB bounds the pulled layer blobs kept once their images
	// are unpacked (--oci-blob-cache; negative: no bound).
	OCIBlobCacheMB int
	// VolumeSizeMB is each new volume's size limit (--volume-size; 0:
	// volumes.DefaultSizeMB).
	VolumeSizeMB int
	// ObjectStore, if set (s3://bucket/prefix, --object-store), keeps
	// every image in S3-compatible object storage, with endpoint, region
	// and credentials from the AWS_* environment; local disk is then a
	// cache of ImageCacheSize bytes (0: 20 GiB) in DataDir/image-cache.
	ObjectStore    string
	ImageCacheSize int64
	// Limits bound each sandbox's request; zero fields default to the
	// host's CPUs, memory and free disk under DataDir (limits.go).
	Limits sandbox.Limits
	// SweepInterval and DefaultTimeout tune TTL handling.
	SweepInterval  time.Duration
	DefaultTimeout time.Duration
	Logger         *slog.Logger
	// Out receives the start-up banner and template progress.
	Out io.Writer
	// Ready, if set, is called with the bound address once serving.
	Ready func(addr net.Addr)
}

// Run starts the daemon and serves until ctx ends, then shuts down cleanly.
// Sandboxes keep running across restarts: the next Run reattaches to them.
func Run(ctx context.Context, o Options) error {
	if err := fillOptions(&o); err != nil {
		return err
	}
	// The lock comes before anything touches the data dir, and the
	// listeners before anything removes leftovers: a daemon that cannot
	// serve must not have cleaned up another live daemon's sandboxes.
	lock, err := lockDataDir(o.DataDir)
	if err != nil {
		return err
	}
	defer lock.release()
	lns, err := listen(o)
	if err != nil {
		return err
	}
	defer lns.close()
	st, key, vault, err := openData(ctx, &o, lns)
	if err != nil {
		return err
	}
	defer st.Close()
	tpls, imgs, err := templatesAndImages(ctx, o, st)
	if err != nil {
		return err
	}
	defer imgs.flush()
	den := egress.NewDenials()
	rt, closeRuntime, err := newRuntime(ctx, o, den)
	if err != nil {
		return err
	}
	defer closeRuntime(context.WithoutCancel(ctx))
	met := newMetrics()
	met.reg.MustRegister(den)
	mgr, err := newManager(ctx, o, rt, st, imgs, tpls, met, checkSecrets(vault, o.Egress.checkNetwork))
	if err != nil {
		return err
	}
	issuer, err := fillPlaceholders(o, lns, vault, mgr)
	if err != nil {
		return err
	}
	den.SetSink(func(id string, d netpolicy.Denial) { _ = mgr.AppendEvent(id, egressEvent(d)) })
	builds, err := openBuilds(ctx, o, rt, st, imgs, mgr)
	if err != nil {
		return err
	}
	met.watch(mgr, rt, imgs.object)
	nodes, err := startRegistry(ctx, o, st, lns, mgr, met, imgs.object)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{Manager: mgr, Keys: st, Logger: o.Logger, Domain: o.Domain, Templates: builds, Metrics: met.handler(),
		Egress: den, Secrets: vault, Identity: issuer, Nodes: nodes, NodeID: o.NodeID, ClusterKey: clusterKey(o, key)})
	if err != nil {
		return err
	}
	return serve(ctx, o, lns, srv.Handler(), mgr, nodes, key)
}

// clusterKey is the key a node sends the others (Server.ClusterKey): the
// cluster's one API key, when the nodes share images; "" otherwise.
func clusterKey(o Options, key string) string {
	if o.Database == "" || o.ObjectStore == "" {
		return ""
	}
	return key
}

// openEvents opens the sandboxes' event logs: in the node's data dir, or
// in the cluster's database (--database), where every node reads the log
// of a sandbox another ran, dead or alive.
func openEvents(o Options, st *store.Store) (sandbox.EventLog, error) {
	if o.Database != "" {
		return eventlog.OpenShared(st, 0), nil
	}
	return eventlog.Open(filepath.Join(o.DataDir, "events"), 0)
}

// newManager builds the sandbox Manager with its event log, recovers what a
// previous daemon left and warms the built-in templates.
func newManager(ctx context.Context, o Options, rt runtime.Runtime, st *store.Store, imgs *imageStores, tpls []*store.Template, obs sandbox.Observer,
	checkNetwork func(context.Context, netpolicy.Rules) error) (*sandbox.Manager, error) {
	events, err := openEvents(o, st)
	if err != nil {
		return nil, err
	}
	limits, err := sandboxLimits(o)
	if err != nil {
		return nil, err
	}
	vols, err := volumes.New(filepath.Join(o.DataDir, "volumes"), o.Logger)
	if err != nil {
		return nil, err
	}
	mgr, err := sandbox.New(sandbox.Config{
		Limits: limits, Volumes: vols, VolumeSizeMB: o.VolumeSizeMB,
		Runtime: rt, Store: st, Logger: o.Logger, Events: events, Observer: obs, MaxSandboxes: o.MaxSandboxes,
		DefaultTimeout: o.DefaultTimeout, SweepInterval: o.SweepInterval,
		AgentArgs: []string{template.AgentInRootFS}, ClientID: o.NodeID,
		Images: imgs.disk, Content: imgs.content,
		PoolSize: o.PoolSize, PoolTemplates: []string{template.BaseID, template.CodeInterpreterID}, PoolRecent: o.PoolRecent,
		SharedTemplates:  []string{template.BaseID, template.CodeInterpreterID},
		SharedImages:     o.Database != "" && o.ObjectStore != "",
		CloneConcurrency: o.CloneConcurrency, NetworkOpened: o.Egress.Open,
		CheckNetwork: checkNetwork, EgressCA: o.Egress.caPEM, CommandPool: o.CommandPool, NoMemoryWake: o.NoMemoryWake,
		AgentRequestSlots: o.AgentRequestSlots,
		FreeMemoryMiB:     func() int64 { free, _ := hostmm.MemInfoMiB("MemAvailable"); return free },
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.EnsureVolumes(ctx); err != nil {
		return nil, fmt.Errorf("mount volumes: %w", err)
	}
	if err := mgr.Recover(ctx); err != nil {
		return nil, fmt.Errorf("recover sandboxes: %w", err)
	}
	for _, tpl := range tpls {
		if err := warmTemplate(ctx, mgr, imgs.content, st, tpl, o); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

func fillOptions(o *Options) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Out == nil {
		o.Out = os.Stderr
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:3000"
	}
	if o.DataDir == "" {
		o.DataDir = "/var/lib/forkbox"
	}
	if o.NetworkIndex < 0 || o.NetworkIndex > 50 {
		return fmt.Errorf("network index %d out of 0..50", o.NetworkIndex)
	}
	if o.NodeID == "" {
		o.NodeID = hostname()
	}
	if o.AdvertiseURL != "" {
		if err := checkAdvertiseURL(o.AdvertiseURL); err != nil {
			return err
		}
	}
	if o.Database != "" {
		if _, err := store.ParseURL(o.Database); err != nil {
			return fmt.Errorf("--database: %w", err)
		}
	}
	if o.ObjectStore != "" {
		if _, _, err := images.ParseObjectStoreURL(o.ObjectStore); err != nil {
			return fmt.Errorf("--object-store: %w", err)
		}
	}
	var err error
	if o.MaxSandboxes, err = maxSandboxes(o.MaxSandboxes); err != nil {
		return err
	}
	if o.TemplateDir == "" {
		o.TemplateDir = filepath.Join(o.DataDir, "templates")
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return err
	}
	if o.RunscPath, err = FindBinary(o.RunscPath, "runsc"); err != nil {
		return err
	}
	o.AgentPath, err = FindBinary(o.AgentPath, "forkbox-agent")
	return err
}

// serve runs the HTTP server, the evictor and the node registry's
// heartbeats on lns until ctx ends.
func serve(ctx context.Context, o Options, lns *listeners, h http.Handler, mgr *sandbox.Manager, nodes *cluster.Registry, key string) error {
	hs := server.NewHTTPServer(h, o.Logger)
	// The evictor and the node's heartbeats run until the daemon stops;
	// the registry's last write ends this node's lease.
	bgCtx, stopBackground := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { mgr.Run(bgCtx) })
	bg.Go(func() { nodes.Run(bgCtx) })
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(lns.plain) }()
	lns.tls.start(o, h, errc)
	printBanner(o.Out, lns.plain.Addr(), key)
	lns.tls.printBanner(o.Out, o.Domain)
	o.Logger.Info("forkbox serving", "addr", lns.plain.Addr().String(), "data", o.DataDir, "pid", os.Getpid(), "max_sandboxes", o.MaxSandboxes)
	if o.Ready != nil {
		o.Ready(lns.plain.Addr())
	}
	var err error
	select {
	case <-ctx.Done():
		o.Logger.Info("forkbox shutting down", "reason", context.Cause(ctx))
	case err = <-errc:
		o.Logger.Error("forkbox shutting down: a listener failed", "err", err)
	}
	stopBackground()
	bg.Wait()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if serr := hs.Shutdown(shutCtx); serr != nil && err == nil {
		err = serr
	}
	if serr := lns.tls.shutdown(shutCtx); serr != nil && err == nil {
		err = serr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	finishPauses(ctx, o.Logger, mgr)
	logLeftRunning(shutCtx, o.Logger, mgr)
	return err
}

func printBanner(w io.Writer, addr net.Addr, key string) {
	url := "http://" + addr.String()
	fmt.Fprintf(w, "\nforkbox is serving on %s\n\n", url)
	fmt.Fprintf(w, "API key: %s\n\nPaste into the shell of an E2B client:\n", key)
	fmt.Fprintf(w, "  export E2B_API_URL=%s\n  export E2B_SANDBOX_URL=%s\n  export E2B_API_KEY=%s\n\n", url, url, key)
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "forkbox"
	}
	return h
}

// templatesAndImages opens the image stores and builds (once) the built-in
// templates' root filesystems. The stores go first: an object store that
// does not answer is an error in seconds, not after a first start's
// minutes-long build.
func templatesAndImages(ctx context.Context, o Options, st *store.Store) ([]*store.Template, *imageStores, error) {
	imgs, err := openImages(ctx, o, st)
	if err != nil {
		return nil, nil, err
	}
	tpls, err := ensureTemplates(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	return tpls, imgs, nil
}

// ensureTemplates builds (once) the built-in templates' root filesystems:
// base, and the code interpreter on top of it.
func ensureTemplates(ctx context.Context, o Options) ([]*store.Template, error) {
	opts := template.Options{TemplateDir: o.TemplateDir, AgentPath: o.AgentPath, Progress: o.Out, Logger: o.Logger, CodePrewarmJS: o.CodePrewarmJS}
	base, err := template.EnsureBase(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("base template: %w", err)
	}
	ci, err := template.EnsureCodeInterpreter(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("code interpreter template: %w", err)
	}
	return []*store.Template{base, ci}, nil
}

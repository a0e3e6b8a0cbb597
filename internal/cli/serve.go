package cli

import (
	"errors"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ServeFunc runs the daemon for "forkbox serve". cmd/forkbox sets it before
// calling Execute, so the CLI does not import the daemon's internals;
// it reads its settings from cmd.Flags() (see serveCmd for the names) and
// should return when cmd.Context() is cancelled (SIGINT/SIGTERM).
var ServeFunc func(cmd *cobra.Command, args []string) error

func serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the forkbox daemon",
		Long: `Run the forkbox daemon: the E2B-compatible REST API, the data-plane proxy to
the agents in the sandboxes, and the TTL sweeper. It stops cleanly on SIGINT or
SIGTERM; paused sandboxes and snapshots survive restarts in --data-dir.`,
		Example: `  forkbox serve
  forkbox serve --listen 0.0.0.0:3000 --data-dir /srv/forkbox --log-level debug
  forkbox serve --domain forkbox.test --tls-listen 127.0.0.1:443
  forkbox serve --database postgres://forkbox@db.internal:5432/forkbox
  AWS_ENDPOINT_URL=http://127.0.0.1:8333 AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=… forkbox serve --object-store s3://forkbox/images --image-cache-size 50GiB`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if ServeFunc == nil {
				return errors.New("serve is not available in this build")
			}
			return ServeFunc(cmd, args)
		},
	}
	f := cmd.Flags()
	f.String("listen", "127.0.0.1:3000", "address to serve the API and data plane on")
	f.String("data-dir", "/var/lib/forkbox", "directory for the database, snapshots and rootfs")
	f.String("domain", "", "domain of per-port sandbox hosts (<port>-<id>.<domain>) returned to clients (default: none, clients keep their URLs)")
	f.String("tls-listen", "", "also serve with TLS on this address (e.g. 127.0.0.1:443), for clients that build https://<port>-<id>.<domain> URLs")
	f.String("tls-cert", "", "PEM certificate (chain) for --tls-listen (default: issued by a local CA generated in <data-dir>/tls)")
	f.String("tls-key", "", "PEM private key of --tls-cert")
	f.String("runsc", "", "path of the runsc binary (default: found next to forkbox or in PATH)")
	f.String("agent", "", "path of the forkbox-agent binary put into every sandbox")
	f.Duration("sweep-interval", time.Second, "how often expired sandboxes are paused or killed")
	f.Duration("default-timeout", 300*time.Second, "sandbox time to live when a request names none")
	f.String("log-level", "info", "log level: debug, info, warn, error")
	f.String("template-dir", "", "directory of the cached templates (default <data-dir>/templates)")
	f.Int("clone-concurrency", 0, "restores one clone operation runs at a time (0: the default, 10)")
	f.Int("standby", 2, "runsc containers per sandbox shape created ahead for restores (resume, clone, rollback) to take (0: none)")
	f.Int("pool-size", 2, "sandboxes per built-in template kept restored ahead of time, so a create is a hand-over (0: none)")
	f.Int("pool-recent", 3, "user templates (the most recently built or created from) that get a pool of --pool-size too, "+
		"filled only while running and pooled sandboxes stay under --max-sandboxes (0: none)")
	f.Int("max-sandboxes", 0, "sandboxes running at once; more creates, resumes, forks and clones answer 429 "+
		"(0: from host memory, (MemTotal − 2 GiB) / 128 MiB, at most 200)")
	f.Int("max-sandbox-cpus", 0, "most CPUs one sandbox may ask for (cpuCount); larger requests get 400 (0: the host's CPUs)")
	f.Int("max-sandbox-memory", 0, "most memory in MiB one sandbox may ask for (memoryMB); larger requests get 400 (0: the host's memory)")
	f.Int("max-sandbox-disk", 0, "largest disk in MiB one sandbox may ask for (diskSizeMB); larger requests get 400 (0: the free disk under --data-dir)")
	f.Int("volume-size", 1024, "size limit in MiB of each new volume: writes past it get ENOSPC inside sandboxes, 507 through the content API")
	f.Int("network-index", 0, "give this daemon its own sandbox subnet 10.(201+N).0.0/16 (for several daemons on one host)")
	f.StringSlice("egress-open", nil, "forbidden range (private, link-local…) sandbox egress rules may allow, as a CIDR; repeatable")
	f.String("egress-dns", "", "DNS server (host:port) the egress proxy resolves allowOut host names with (default: the host's resolver)")
	f.String("egress-ca-file", "", "PEM file of extra root certificates the egress proxy trusts, besides the system's, when it re-encrypts intercepted HTTPS (network.rules)")
	f.StringArray("registry-mirror", nil, "HOST=URL: pull images of registry HOST from the mirror at URL first (repeatable, one per host), e.g. docker.io=http://127.0.0.1:5000")
	f.Duration("template-ready-timeout", 2*time.Minute, "how long a template build's ready command may take to succeed before the build fails")
	f.StringArray("insecure-registry", nil, "registry HOST that may be spoken to over plain HTTP or unverified TLS (repeatable; loopback registries always may)")
	f.Int("oci-blob-cache", 1024, "MiB of pulled image layers (compressed) kept after their images are unpacked, so a later pull skips the download; "+
		"the least recently used go first (0: none kept, -1: no bound)")
	f.String("secrets-key-file", "", "file of the AES-256 key (64 hex digits, mode 0600) secret values are encrypted with (default: <data-dir>/secrets.key, made at first start)")
	databaseFlags(f)
	f.String("oidc-issuer", "", "URL of this daemon as the OIDC issuer of sandboxes' workload identity tokens (iam.tokens); relying parties fetch <URL>/.well-known/openid-configuration (default: http://<listen address>)")
	objectStoreFlags(f)
	memoryFlags(f)
	return cmd
}

// databaseFlags are the flags of a daemon sharing its records with others.
func databaseFlags(f *pflag.FlagSet) {
	f.String("database", "", "postgres://user:pass@host:port/db URL of a PostgreSQL that keeps the records (sandboxes, snapshots, templates, secrets, volumes, API keys) "+
		"and the cluster-wide keys and CAs, shared by every daemon given the same URL (default: SQLite in --data-dir)")
	f.String("node-id", "", "this daemon's name in the records (sandboxes' clientID): daemons sharing a --database each need their own (default: the host name)")
	f.String("advertise-url", "", "URL the other nodes of the cluster reach this daemon at, as the node registry (forkbox node list) reports it (default: http://<listen address>, with the host name for 0.0.0.0)")
	// Tests shorten these; a lease must outlast several heartbeats.
	f.Duration("node-heartbeat", 0, "how often this node renews its lease in the node registry (0: 2s)")
	f.Duration("node-lease", 0, "how long a node counts as alive after its last heartbeat (0: 10s)")
	_ = f.MarkHidden("node-heartbeat")
	_ = f.MarkHidden("node-lease")
}

// objectStoreFlags are serve's flags of images in object storage.
func objectStoreFlags(f *pflag.FlagSet) {
	f.String("object-store", "", "keep pause images, snapshots, template layers and template images in S3-compatible object storage at s3://bucket/prefix "+
		"(endpoint, region and credentials from AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); local disk becomes a cache (default: local disk only)")
	f.String("image-cache-size", "20GiB", "size limit of the local image cache with --object-store (bytes, or with a unit: 512MiB, 20GiB, 1TB); the least recently opened images go first")
}

// memoryFlags are serve's flags trading sandboxes' host memory (or CPU)
// against speed (README "Idle memory and create latency", "Restores on demand").
func memoryFlags(f *pflag.FlagSet) {
	f.Bool("host-hugepages", true, "set the host's transparent huge page settings so gVisor backs sandbox memory with huge pages "+
		"(shmem_enabled never→advise, defrag madvise→defer): restores of big sandboxes ~2× faster, ~7 MiB more per idle sandbox")
	f.Int("agent-request-slots", runtime.NumCPU(), "data-plane requests to sandboxes' agents (commands, files, watches) let in at once; "+
		"the rest wait their turn in arrival order, and a burst to many sandboxes ends sooner than with all of them sharing the CPUs (0: no limit)")
	f.Int("command-pool", 1, "login shells each sandbox's agent keeps started ahead of time for commands.run (`bash -l -c`), so a command does not wait for one (0: off)")
	f.Bool("restore-on-demand", true, restoreOnDemandHelp)
	f.Bool("restore-hold-gc", true, "hold each restoring sandbox's garbage collector (gVisor's sentry) off while it decodes the sandbox's state, "+
		"and return its free heap pages two seconds after: restores take less CPU (28–40 ms against 43–54 ms alone) and an idle sandbox 1.6 MiB less "+
		"(needs the patched runsc of scripts/build-runsc.sh; false: collect as unpatched runsc does)")
	f.Bool("memory-wake", true, "wake each sandbox's out-of-memory guard from the host when the sandbox's memory grows (cgroup thresholds), so a sandbox running a process of its own need not poll its memory ~10 times a second (off: it does)")
	f.Bool("app-huge-pages", false, "back sandboxes' memory with huge pages (runsc --app-huge-pages): ~9 MiB more per idle base sandbox, fewer page faults for large ones")
	f.Bool("systrap-fast-path", false, "let sandboxes spin on a CPU while they wait for a syscall's answer (runsc's systrap fast path, its default): "+
		"no faster here one sandbox at a time, and many sandboxes busy at once spin against each other (100 commands at once: 31 s p50 with it, 5 s without)")
	f.Bool("code-prewarm-js", false, "start the code interpreter's JavaScript kernel in the template's image, as E2B does (+~40 MiB per idle code-interpreter sandbox); off: it starts on the first JavaScript cell (~0.5 s once)")
}

// restoreOnDemandHelp is serve --restore-on-demand's help (README "Restores on demand").
const restoreOnDemandHelp = "restores (resume, clone, rollback, pool fills) read a sandbox's memory pages from its image when it first " +
	"touches them instead of copying the whole image first: clones of one image share its pages through the page cache and a " +
	"resume does not wait for the image to load; a later snapshot of the sandbox reads the pages it never touched " +
	"(needs the patched runsc of scripts/build-runsc.sh; false: copy eagerly)"

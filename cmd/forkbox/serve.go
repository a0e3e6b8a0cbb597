package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/forkbox/forkbox/internal/daemon"
	"github.com/forkbox/forkbox/internal/sandbox"
	"github.com/forkbox/forkbox/internal/template"
)

// serve runs the daemon with the serve command's flags.
func serve(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	str := func(name string) string { v, _ := f.GetString(name); return v }
	level := new(slog.LevelVar)
	if err := level.UnmarshalText([]byte(str("log-level"))); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)
	sweep, _ := f.GetDuration("sweep-interval")
	timeout, _ := f.GetDuration("default-timeout")
	netIndex, _ := f.GetInt("network-index")
	poolSize, _ := f.GetInt("pool-size")
	commandPool, _ := f.GetInt("command-pool")
	agentSlots, _ := f.GetInt("agent-request-slots")
	memoryWake, _ := f.GetBool("memory-wake")
	prewarmJS, _ := f.GetBool("code-prewarm-js")
	appHuge, _ := f.GetBool("app-huge-pages")
	fastPath, _ := f.GetBool("systrap-fast-path")
	poolRecent, _ := f.GetInt("pool-recent")
	standby, _ := f.GetInt("standby")
	onDemand, _ := f.GetBool("restore-on-demand")
	holdGC, _ := f.GetBool("restore-hold-gc")
	cloneConc, _ := f.GetInt("clone-concurrency")
	maxSandboxes, _ := f.GetInt("max-sandboxes")
	hugePages, _ := f.GetBool("host-hugepages")
	eg, err := egressOptions(f)
	if err != nil {
		return err
	}
	mirrors, _ := f.GetStringArray("registry-mirror")
	insecure, _ := f.GetStringArray("insecure-registry")
	readyTimeout, _ := f.GetDuration("template-ready-timeout")
	blobCache, _ := f.GetInt("oci-blob-cache")
	maxCPUs, _ := f.GetInt("max-sandbox-cpus")
	maxMem, _ := f.GetInt("max-sandbox-memory")
	maxDisk, _ := f.GetInt("max-sandbox-disk")
	volumeSize, _ := f.GetInt("volume-size")
	cacheSize, err := humanize.ParseBytes(str("image-cache-size"))
	if err != nil || cacheSize == 0 {
		return fmt.Errorf("--image-cache-size %q: want a size such as 20GiB", str("image-cache-size"))
	}
	heartbeat, _ := f.GetDuration("node-heartbeat")
	lease, _ := f.GetDuration("node-lease")
	return daemon.Run(cmd.Context(), daemon.Options{
		Listen: str("listen"), DataDir: str("data-dir"), TemplateDir: str("template-dir"),
		Domain: str("domain"), RunscPath: str("runsc"), AgentPath: str("agent"),
		TLSListen: str("tls-listen"), TLSCert: str("tls-cert"), TLSKey: str("tls-key"),
		SweepInterval: sweep, DefaultTimeout: timeout, NetworkIndex: netIndex, PoolSize: poolSize, PoolRecent: poolRecent, CommandPool: commandPool, AgentRequestSlots: agentSlots, NoMemoryWake: !memoryWake, CodePrewarmJS: prewarmJS, AppHugePages: appHuge, SystrapFastPath: fastPath, Standby: standby, CloneConcurrency: cloneConc,
		MaxSandboxes: maxSandboxes, EagerRestore: !onDemand, CollectDuringRestore: !holdGC,
		HostHugePages: hugePages, Egress: eg, RegistryMirrors: mirrors, InsecureRegistries: insecure, TemplateReadyTimeout: readyTimeout,
		OCIBlobCacheMB: blobCache, VolumeSizeMB: volumeSize,
		Limits: sandbox.Limits{MaxCPUs: maxCPUs, MaxMemoryMB: maxMem, MaxDiskMB: maxDisk},
		Logger: log, Out: cmd.ErrOrStderr(),
		SecretsKeyFile: str("secrets-key-file"), OIDCIssuer: str("oidc-issuer"), Database: str("database"), NodeID: str("node-id"),
		ObjectStore: str("object-store"), ImageCacheSize: int64(cacheSize),
		AdvertiseURL: str("advertise-url"), NodeHeartbeat: heartbeat, NodeLease: lease,
	})
}

// buildTemplate builds the base template's root filesystem ahead of serve.
func buildTemplate(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	str := func(name string) string { v, _ := f.GetString(name); return v }
	dir := str("template-dir")
	if dir == "" {
		dir = filepath.Join(str("data-dir"), "templates")
	}
	agent, err := daemon.FindBinary(str("agent"), "forkbox-agent")
	if err != nil {
		return err
	}
	// The code interpreter's template builds the base one first.
	_, err = template.EnsureCodeInterpreter(cmd.Context(), template.Options{
		TemplateDir: dir, AgentPath: agent, Progress: cmd.ErrOrStderr(),
	})
	return err
}

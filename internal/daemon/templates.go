package daemon

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/runtime/gvisor"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/template"
	"github.com/forkbox/forkbox/internal/template/build"
)

// newBuilds opens the template build service: images pulled into
// DataDir/oci (with the configured mirrors), uploads, scratch and template
// records under DataDir/builds, layers and template images in the content
// store. pools (the sandbox Manager) hears of built and deleted templates,
// whose sandboxes it may keep restored ahead.
func newBuilds(ctx context.Context, o Options, rt runtime.Runtime, st *store.Store, content images.ContentStore, pools build.Pools) (*build.Service, error) {
	mirrors := map[string]string{}
	for _, m := range o.RegistryMirrors {
		host, u, err := oci.ParseMirror(m)
		if err != nil {
			return nil, fmt.Errorf("--registry-mirror %q: %w", m, err)
		}
		mirrors[host] = u
	}
	blobCache := int64(o.OCIBlobCacheMB) << 20
	if o.OCIBlobCacheMB < 0 {
		blobCache = -1
	}
	pulls, err := oci.New(oci.Options{CacheDir: filepath.Join(o.DataDir, "oci"), Mirrors: mirrors, Insecure: o.InsecureRegistries,
		BlobCacheBytes: blobCache, OwnsCache: true}) // Run holds the data dir's lock
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.DataDir, "builds")
	uploads, err := build.NewUploads(filepath.Join(dir, "uploads"), 0)
	if err != nil {
		return nil, err
	}
	salt, err := imageKey(gvisor.FlagsFor(o.AppHugePages), o.RunscPath)
	if err != nil {
		return nil, err
	}
	var node string
	if st.Postgres() { // the cluster's records: each has a home node
		node = o.NodeID
	}
	return build.New(build.Config{
		Runtime: rt, Store: st, Images: pulls, Content: content, Uploads: uploads, Dir: dir,
		AgentPath: o.AgentPath, AgentArgs: []string{template.AgentInRootFS},
		BaseTemplate: template.BaseID, ImageSalt: salt, Logger: o.Logger, ReadyTimeout: o.TemplateReadyTimeout,
		Pools: pools, HostCABundle: template.HostCABundle, NodeID: node,
	})
}

// openBuilds opens the build service, the last owner of content references
// to set its own (after the Manager's and the built-in templates'), and
// then has the image store collect what none holds.
func openBuilds(ctx context.Context, o Options, rt runtime.Runtime, st *store.Store, imgs *imageStores, pools build.Pools) (*build.Service, error) {
	builds, err := newBuilds(ctx, o, rt, st, imgs.content, pools)
	if err != nil {
		return nil, err
	}
	return builds, imgs.collect(ctx, o.Logger)
}

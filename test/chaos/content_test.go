package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// This file is the chaos run's side of the image store: user templates
// built from a busybox image in a loopback registry, created from and
// deleted while sandboxes and snapshots use them, and the accounting of
// every content entry (layers, template images) and OCI blob on disk.

// maxTemplates caps the user templates the run keeps.
const maxTemplates = 2

// templatePrefix names the run's user templates.
const templatePrefix = "chaos-"

// image is the busybox image the daemon pulls (through its mirror).
const image = "docker.io/fbx/busybox:1"

// userTemplates lists the run's user templates (nil if the daemon does not
// answer).
func (r *run) userTemplates(ctx context.Context) []client.Template {
	user, _ := r.templates(ctx)
	return user
}

// templates lists the run's user templates and the daemon's built-in ones.
func (r *run) templates(ctx context.Context) (user, builtin []client.Template) {
	all, err := r.api().ListTemplates(ctx)
	if err != nil {
		r.t.Logf("list templates: %v", err)
	}
	for _, t := range all {
		if len(t.Names) > 0 && strings.HasPrefix(t.Names[0], templatePrefix) {
			user = append(user, t)
		} else {
			builtin = append(builtin, t)
		}
	}
	return user, builtin
}

// templateOps are the operations on user templates: a build of a new one
// (or a rebuild, whose RUN may be cached) below maxTemplates, a create
// from one and its deletion.
func (r *run) templateOps(tpls []client.Template, nLive int) []op {
	var ops []op
	if len(tpls) < maxTemplates {
		name := fmt.Sprintf("%s%d", templatePrefix, r.rng.IntN(maxTemplates+1))
		step := fmt.Sprintf("echo %d > /chaos", r.rng.IntN(3))
		ops = append(ops, op{"build", func(ctx context.Context, c *client.Client) error {
			tk, err := c.RequestTemplateBuild(ctx, name, nil, 1, 256)
			if err != nil {
				return err
			}
			// The build runs on in the background, raced by the round's
			// other operations and the daemon's kills.
			return c.StartTemplateBuild(ctx, tk.TemplateID, tk.BuildID, client.TemplateBuildSpec{
				FromImage: image, Steps: []client.TemplateStep{{Type: "RUN", Args: []string{step, "root"}}},
			})
		}})
	}
	if len(tpls) == 0 {
		return ops
	}
	t := tpls[r.rng.IntN(len(tpls))]
	name := t.Names[0]
	if nLive < maxLive && (t.BuildStatus == "ready" || t.BuildCount > 1) {
		// As likely as the base template's creates together, and thrice
		// the deletion: sandboxes and snapshots of a template are what its
		// deletion must neither break nor leak.
		create := op{"create-user", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: name, Timeout: 10 * time.Minute})
			return err
		}}
		ops = append(ops, create, create, create)
	}
	return append(ops, op{"delete-template", func(ctx context.Context, c *client.Client) error {
		return c.DeleteTemplate(ctx, name)
	}})
}

// waitBuilds waits (at most 40 s) until no build of a user template runs,
// so the accounting sees no build's content in flight. A build requested
// but never started (its start lost a race with another build of the
// template) waits for good and holds nothing.
func (r *run) waitBuilds(ctx context.Context) {
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		busy := false
		for _, t := range r.userTemplates(ctx) {
			busy = busy || r.building(t.TemplateID)
		}
		if !busy {
			return
		}
	}
	r.t.Errorf("user template builds still running after 40 s")
}

// building reports whether a build of template id runs (GET
// /templates/{id}, whose builds the Go SDK does not read).
func (r *run) building(id string) bool {
	resp, err := r.nodes[0].d.Do(http.MethodGet, "/templates/"+id, nil)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var tpl struct {
		Builds []struct{ Status string } `json:"builds"`
	}
	json.NewDecoder(resp.Body).Decode(&tpl)
	for _, b := range tpl.Builds {
		if b.Status == "building" {
			return true
		}
	}
	return false
}

// contentEntries lists the content entries on disk (kind/key) and adds a
// problem for each half-written or half-removed one.
func (r *run) contentEntries(p *problems) []string {
	root := filepath.Join(r.nodes[0].d.DataDir, "images")
	var out []string
	for _, k := range images.ContentKinds {
		for _, name := range dirNames(filepath.Join(root, string(k))) {
			if strings.HasPrefix(name, ".") {
				p.add("content %s/%s half written", k, name)
				continue
			}
			out = append(out, string(k)+"/"+name)
		}
	}
	if left := dirNames(filepath.Join(root, ".gc")); len(left) > 0 {
		p.add("content removals the stopped daemon left unfinished: %v", left)
	}
	return out
}

// contentProblems checks a stopped daemon's content against its records:
// every entry a live sandbox, a snapshot or a template record names is on
// disk, and with builtinOnly (nothing but the built-in templates left)
// nothing else is. It returns the entries on disk.
func (r *run) contentProblems(p *problems, builtinOnly bool) []string {
	ctx := context.Background()
	onDisk := r.contentEntries(p)
	st, err := store.Open(ctx, r.nodes[0].d.DataDir)
	if err != nil {
		p.add("open the records: %v", err)
		return onDisk
	}
	defer st.Close()
	named := recordedContent(ctx, st, p)
	for e, holder := range named {
		if !slices.Contains(onDisk, e) {
			p.add("content %s of %s is gone", e, holder)
		}
	}
	// A built-in template also holds its image's other shapes (the image's
	// key and 12 hex digits of shape), which no record names.
	for _, e := range onDisk {
		for n, holder := range named {
			if base, ok := strings.CutPrefix(n, string(images.KindTemplateImage)+"/"); ok && isShape(e, base) {
				named[e] = holder + " (a shape of its image)"
			}
		}
	}
	if builtinOnly {
		for _, e := range onDisk {
			if named[e] == "" {
				p.add("content %s is held by nothing left (leaked)", e)
			}
		}
	}
	return onDisk
}

// recordedContent maps each content entry (kind/key) a live sandbox, a
// snapshot or a template record names to a holder naming it.
func recordedContent(ctx context.Context, st *store.Store, p *problems) map[string]string {
	named := map[string]string{}
	sbs, _, err := st.ListSandboxes(ctx, store.SandboxFilter{States: []string{"running", "paused"}})
	if err != nil {
		p.add("list sandbox records: %v", err)
	}
	for _, sb := range sbs {
		for _, ref := range sb.Content {
			named[ref.String()] = "sandbox " + sb.ID
		}
	}
	for _, kind := range []string{store.KindTemplate, store.KindSnapshot} {
		tpls, err := st.ListTemplates(ctx, kind)
		if err != nil {
			p.add("list %s records: %v", kind, err)
		}
		for _, t := range tpls {
			for _, ref := range t.Content {
				named[ref.String()] = kind + " " + t.ID
			}
		}
	}
	return named
}

// ociProblems checks the OCI caches of stopped node n, run with
// --oci-blob-cache 0: no blob outlives its image's unpack, no download was
// left half done, and no unpacked-image cache of its own exists (an
// unpacked image is a layer).
func (r *run) ociProblems(p *problems, n *node) {
	dir := filepath.Join(n.d.DataDir, "oci")
	if blobs := dirNames(filepath.Join(dir, "blobs", "sha256")); len(blobs) > 0 {
		p.add("%s: OCI blobs kept with a cache bound of 0: %v", n, blobs)
	}
	if tmp := dirNames(filepath.Join(dir, "blobs", "tmp")); len(tmp) > 0 {
		p.add("%s: OCI downloads left half done: %v", n, tmp)
	}
	if _, err := os.Stat(filepath.Join(dir, "rootfs")); err == nil {
		p.add("%s: an OCI unpack cache (oci/rootfs) exists", n)
	}
}

// reclaimedByRestart reports the entries on disk before a restart that the
// restart's collection removed: no record holds them, so the running
// daemon should have removed them when their last holder let go.
func (r *run) reclaimedByRestart(before []string) []string {
	var p problems
	after := r.contentEntries(&p)
	var gone []string
	for _, e := range before {
		if !slices.Contains(after, e) {
			gone = append(gone, e)
		}
	}
	return gone
}

// onlyBuiltinContent checks, with the daemon running and everything else
// gone, that the image store holds no layer and one image per built-in
// template, besides its images of other shapes.
func (r *run) onlyBuiltinContent(builtins int) []string {
	var p problems
	var layers, imgs []string
	all := r.contentEntries(&p)
	for _, e := range all {
		switch {
		case strings.HasPrefix(e, string(images.KindLayer)+"/"):
			layers = append(layers, e)
		case !slices.ContainsFunc(all, func(base string) bool {
			return isShape(e, strings.TrimPrefix(base, string(images.KindTemplateImage)+"/"))
		}):
			imgs = append(imgs, e)
		}
	}
	if len(layers) > 0 {
		p.add("layers left with no template, sandbox or snapshot: %v", layers)
	}
	if len(imgs) != builtins {
		p.add("template images %v, want one per built-in template (%d) besides their shapes", imgs, builtins)
	}
	return p
}

// isShape reports whether content entry e (kind/key) is an image of another
// shape of the template image of key base.
func isShape(e, base string) bool {
	key, ok := strings.CutPrefix(e, string(images.KindTemplateImage)+"/")
	return ok && len(key) == len(base)+12 && strings.HasPrefix(key, base)
}

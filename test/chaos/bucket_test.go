package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/store"
)

// This file accounts for a cluster's bucket (the layout under its prefix
// is images.ObjectStore's): images/<kind>/<id> are the pause images of
// paused sandboxes and the snapshots' images; content/<kind>/<key> are
// layers and template images; holds/<kind>/<key>/<holder kind>/<id> and
// holders/<holder kind>/<id>/<kind>/<key> are the two markers of one
// reference (a holder holding an entry), the second one naming the node
// that wrote it. Blobs are collected an hour after nothing names them, so
// they are not accounted.

// objects lists the keys under prefix in the cluster's part of the
// bucket, relative to it (so "images/paused/<id>").
func (cl *cluster) objects(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	opts := minio.ListObjectsOptions{Prefix: bucketPrefix + "/" + prefix, Recursive: true}
	for o := range cl.srv.Client().ListObjects(ctx, cl.srv.Bucket, opts) {
		if o.Err != nil {
			return keys, o.Err
		}
		keys = append(keys, strings.TrimPrefix(o.Key, bucketPrefix+"/"))
	}
	slices.Sort(keys)
	return keys, nil
}

// object reads the object at key (relative to the cluster's prefix).
func (cl *cluster) object(ctx context.Context, key string) ([]byte, error) {
	o, err := cl.srv.Client().GetObject(ctx, cl.srv.Bucket, bucketPrefix+"/"+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer o.Close()
	return io.ReadAll(o)
}

// split lists the objects under prefix split at their slashes after it
// (parts of the wrong count are a problem).
func (r *run) split(ctx context.Context, p *problems, prefix string, parts int) [][]string {
	keys, err := r.cl.objects(ctx, prefix)
	if err != nil {
		p.add("list %s in the bucket: %v", prefix, err)
	}
	var out [][]string
	for _, k := range keys {
		f := strings.Split(strings.TrimPrefix(k, prefix), "/")
		if len(f) != parts {
			p.add("object %s of an unknown shape", k)
			continue
		}
		out = append(out, f)
	}
	return out
}

// bucketProblems checks the bucket of a stopped cluster against what it
// listed and its records: exactly the paused sandboxes' pause images and
// the snapshots' images, every content entry a record names, and each
// running sandbox's layer in its node's cache. It counts the content
// entries.
func (r *run) bucketProblems(p *problems, l listed) int {
	ctx := context.Background()
	byKind := map[string][]string{}
	for _, f := range r.split(ctx, p, "images/", 2) {
		byKind[f[0]] = append(byKind[f[0]], f[1])
	}
	p.same("pause images in the bucket", byKind["paused"], l.paused)
	p.same("snapshot images in the bucket", byKind["snapshots"], l.snapshots)
	for kind, ids := range byKind {
		if kind != "paused" && kind != "snapshots" {
			p.add("images of an unknown kind %s in the bucket: %v", kind, ids)
		}
	}
	var content []string
	for _, f := range r.split(ctx, p, "content/", 2) {
		content = append(content, f[0]+"/"+f[1])
	}
	for e, holder := range recordedContent(ctx, r.cl.st, p) {
		if !slices.Contains(content, e) {
			p.add("content %s of %s is not in the bucket", e, holder)
		}
	}
	r.cacheProblems(ctx, p)
	return len(content)
}

// cacheProblems checks each running sandbox's layer (the root filesystem
// it reads for its whole life) is in its node's image cache, which never
// evicts it. Its template image is not: a sandbox restored from a snapshot
// (a clone's copy on another node) holds it but never opened it there.
func (r *run) cacheProblems(ctx context.Context, p *problems) {
	sbs, _, err := r.cl.st.ListSandboxes(ctx, store.SandboxFilter{States: []string{"running"}})
	if err != nil {
		p.add("list sandbox records: %v", err)
	}
	for _, sb := range sbs {
		nd := r.ownerOf(client.SandboxInfo{ClientID: sb.ClientID})
		if nd == nil {
			p.add("running sandbox %s is on %q, no node of the run", sb.ID, sb.ClientID)
			continue
		}
		for _, ref := range sb.Content {
			if ref.Kind != images.KindLayer {
				continue
			}
			manifest, err := r.cl.object(ctx, "content/"+ref.String())
			if err != nil {
				continue // reported by bucketProblems
			}
			sum := sha256.Sum256(manifest)
			dir := filepath.Join(nd.d.DataDir, "image-cache", "objects", hex.EncodeToString(sum[:]))
			if _, err := os.Stat(dir); err != nil {
				p.add("running sandbox %s: its content %s is not in %s's image cache", sb.ID, ref, nd)
			}
		}
	}
}

// markerProblems checks the references in the bucket of a running
// cluster (its start-up collection done): each one has both its markers,
// each holder is alive (a listed sandbox or snapshot, a sandbox a node
// runs, a template of tpls, no build), a sandbox's references are marked
// by its node, every entry is held and every held entry is there.
func (r *run) markerProblems(l listed, tpls []client.Template) []string {
	ctx := context.Background()
	var p problems
	holds, holders := map[string]bool{}, map[string]bool{} // "holder kind:id entry kind/key"
	for _, f := range r.split(ctx, &p, "holds/", 4) {
		holds[f[2]+":"+f[3]+" "+f[0]+"/"+f[1]] = true
	}
	for _, f := range r.split(ctx, &p, "holders/", 4) {
		holders[f[0]+":"+f[1]+" "+f[2]+"/"+f[3]] = true
	}
	p.same("references in holds/ alone (no holders/ marker)", slices.Collect(maps.Keys(holds)), slices.Collect(maps.Keys(holders)))
	live := liveHolders(l, tpls)
	for _, n := range r.nodes {
		// A node's pooled and standby sandboxes are listed nowhere, but
		// hold their template's image while they run.
		for _, id := range dirNames(filepath.Join(n.d.DataDir, "runtime", "sandboxes")) {
			live["sandbox:"+id] = true
		}
	}
	held := map[string]bool{}
	for _, ref := range slices.Sorted(maps.Keys(holds)) {
		holder, entry, _ := strings.Cut(ref, " ")
		held[entry] = true
		if !live[holder] {
			p.add("reference of %s, which is gone, to %s (leaked)", holder, entry)
		}
	}
	var content []string
	for _, f := range r.split(ctx, &p, "content/", 2) {
		content = append(content, f[0]+"/"+f[1])
	}
	for _, e := range content {
		if !held[e] {
			p.add("content %s is held by nothing (leaked)", e)
		}
	}
	for _, e := range slices.Sorted(maps.Keys(held)) {
		if !slices.Contains(content, e) {
			p.add("content %s is held but not in the bucket", e)
		}
	}
	r.markerOwners(ctx, &p, l)
	return p
}

// liveHolders are the holders (kind:id) that may hold content: the listed
// sandboxes and snapshots and the templates of tpls (user-built or
// built-in).
func liveHolders(l listed, tpls []client.Template) map[string]bool {
	live := map[string]bool{}
	for _, id := range slices.Concat(l.running, l.paused) {
		live["sandbox:"+id] = true
	}
	for _, id := range l.snapshots {
		live["snapshot:"+id] = true
	}
	for _, t := range tpls {
		if len(t.Names) > 0 && strings.HasPrefix(t.Names[0], templatePrefix) {
			live["template:"+t.TemplateID] = true
		} else {
			live["builtin:"+t.TemplateID] = true
		}
	}
	return live
}

// markerOwners checks each listed sandbox's references are marked by its
// node: a node drops, at its start, the references it marked for holders
// it no longer has, so a sandbox that moved nodes must have been adopted.
func (r *run) markerOwners(ctx context.Context, p *problems, l listed) {
	for _, f := range r.split(ctx, p, "holders/sandbox/", 3) {
		id, key := f[0], "holders/sandbox/"+strings.Join(f, "/")
		home := l.nodes[id]
		var nd *node
		for _, n := range r.nodes {
			if n.id == home {
				nd = n
			}
		}
		if nd == nil {
			continue // not listed: reported as gone
		}
		want := r.cl.host + ":" + filepath.Join(nd.d.DataDir, "image-cache")
		got, err := r.cl.object(ctx, key)
		if err != nil {
			p.add("read %s: %v", key, err)
		} else if string(got) != want {
			p.add("sandbox %s on %s: its reference %s is marked by %q", id, nd, key, got)
		}
	}
}

// bucketEmptyProblems checks the bucket of an emptied cluster holds no
// image and only content the built-in templates hold.
func (r *run) bucketEmptyProblems(builtin []client.Template) []string {
	var p problems
	for _, f := range r.split(context.Background(), &p, "images/", 2) {
		p.add("image %s left in the bucket", strings.Join(f, "/"))
	}
	return append(p, r.markerProblems(listed{}, builtin)...)
}

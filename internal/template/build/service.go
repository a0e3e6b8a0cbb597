package build

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/images"
	"github.com/forkbox/forkbox/internal/oci"
	"github.com/forkbox/forkbox/internal/runtime"
	"github.com/forkbox/forkbox/internal/store"
	"github.com/forkbox/forkbox/internal/template/dockerfile"
)

// Build statuses, as E2B's status route names them.
const (
	StatusWaiting  = "waiting"
	StatusBuilding = "building"
	StatusReady    = "ready"
	StatusError    = "error"
)

// MaxNameLength bounds template names (E2B's limit).
const MaxNameLength = 128

// Config configures a Service. Runtime, Store, Images, Content, Uploads and
// Dir are required.
type Config struct {
	Runtime runtime.Runtime
	Store   *store.Store
	Images  *oci.Client
	// Content keeps layers and template images: the image store's
	// content-addressed part, shared with the sandbox Manager (its
	// sandboxes and snapshots hold what they run on there too).
	Content images.ContentStore
	Uploads *Uploads
	// Dir holds build scratch (Dir/work) and the template records
	// (Dir/records/<templateID>.json).
	Dir string
	// AgentPath is the agent binary put into image rootfs.
	AgentPath string
	// AgentArgs is the first process of build sandboxes.
	AgentArgs []string
	// BaseTemplate is the id of forkbox's own base template (build
	// sandboxes run on it; e2bdev/base names it).
	BaseTemplate string
	// ImageSalt names what template images depend on besides the build
	// (the runsc binary and its flags): a new runsc captures anew.
	ImageSalt string
	// ReadyTimeout bounds a build's ready command (0: DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// Pools, if set, hears of built and deleted templates (pools.go).
	Pools Pools
	// HostCABundle, if set and present, is trusted by RUN steps while
	// they run (ca.go); it is never part of a layer.
	HostCABundle string
	// NodeID, set when the records are a cluster's (PostgreSQL), is this
	// node: its records are written to the store with it as their home
	// (homes.go). Unset, the records are the data dir's alone.
	NodeID string
	Logger *slog.Logger
}

// Record is a user-built template: its names and builds.
type Record struct {
	ID        string    `json:"templateID"`
	Names     []string  `json:"names"` // name (first) and name:tag
	Tags      []string  `json:"tags"`
	CPUCount  int       `json:"cpuCount"`
	MemoryMB  int       `json:"memoryMB"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	Builds    []*Build  `json:"builds"`
	Meta      *Meta     `json:"meta,omitempty"` // of the ready build
	// TagBuilds says which build each tag names (Tags lists the same
	// tags, in the order they were first given).
	TagBuilds map[string]TagRef `json:"tagBuilds,omitempty"`
}

// Build is one build of a template.
type Build struct {
	ID         string     `json:"buildID"`
	Status     string     `json:"status"`
	Reason     *Reason    `json:"reason,omitempty"`
	Logs       []LogEntry `json:"logs"`
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt time.Time  `json:"finishedAt,omitzero"`
	Steps      int        `json:"steps"`
	CacheHits  int        `json:"cacheHits"`
	// Tags are the tags the build was requested with: they name it once
	// it is ready.
	Tags []string `json:"tags,omitempty"`
	// Layers and Image are the content keys of the layers and the image
	// the build made or reused: the template's references in the image
	// store (a deleted template's content goes when nothing else uses it).
	Layers []string `json:"layers,omitempty"`
	Image  string   `json:"image,omitempty"`
	// Published is the store template sandboxes of a ready build start
	// from (StoreID is the template's own id for its latest ready build).
	Published *store.Template `json:"published,omitempty"`
}

// Reason says why a build failed and at which step ("base", "1"…, "finalize").
type Reason struct {
	Message string `json:"message"`
	Step    string `json:"step,omitempty"`
}

// LogEntry is one build log line.
type LogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Message   string    `json:"message"`
	Level     string    `json:"level"`
	Step      string    `json:"step,omitempty"`
}

// Meta is what a ready template's sandboxes inherit from its build.
type Meta struct {
	Env     map[string]string `json:"env,omitempty"`
	User    string            `json:"user"`
	Workdir string            `json:"workdir"`
	// Layer is the key of the template's root filesystem, a layer.
	Layer string `json:"layer,omitempty"`
	// RootFS is that layer's path in records written before Layer: only
	// their migration at load reads it.
	RootFS string `json:"rootfs,omitempty"`
}

// Spec is the body of E2B's POST /v2/templates/{id}/builds/{buildID}.
type Spec struct {
	FromImage         string            `json:"fromImage,omitempty"`
	FromTemplate      string            `json:"fromTemplate,omitempty"`
	FromImageRegistry *Registry         `json:"fromImageRegistry,omitempty"`
	Steps             []dockerfile.Step `json:"steps"`
	StartCmd          string            `json:"startCmd,omitempty"`
	ReadyCmd          string            `json:"readyCmd,omitempty"`
	Force             bool              `json:"force,omitempty"`
}

// Registry is fromImageRegistry: credentials for the image's registry.
type Registry struct {
	Type     string `json:"type"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// Service builds and keeps user templates. It is safe for concurrent use.
type Service struct {
	cfg     Config
	log     *slog.Logger
	content images.ContentStore // layers and template images

	mu      sync.Mutex
	records map[string]*Record // by template id
	running map[string]string  // template id → build id in progress
	ckpts   map[string]ckpt    // template id → its last checkpoint (homes.go)
}

// New opens the service: records are loaded, and builds a previous daemon
// left unfinished are marked failed and their scratch removed.
func New(cfg Config) (*Service, error) {
	if cfg.Runtime == nil || cfg.Store == nil || cfg.Images == nil || cfg.Content == nil || cfg.Uploads == nil || cfg.Dir == "" {
		return nil, fmt.Errorf("template builds need a runtime, store, image client, content store, uploads and a directory: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BaseTemplate == "" {
		cfg.BaseTemplate = "base"
	}
	s := &Service{cfg: cfg, log: cfg.Logger, content: cfg.Content, records: map[string]*Record{}, running: map[string]string{}, ckpts: map[string]ckpt{}}
	for _, d := range []string{"work", "records"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	// Half-made layers and images of interrupted builds are never
	// committed (opening the content store removes them), and their
	// scratch goes; no build holds anything after a restart. Templates
	// hold their builds' content again, as their records say.
	ents, _ := os.ReadDir(filepath.Join(cfg.Dir, "work"))
	for _, e := range ents {
		os.RemoveAll(filepath.Join(cfg.Dir, "work", e.Name()))
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	s.claimLoaded(context.Background())
	for _, r := range s.records {
		if err := s.holdLocked(context.Background(), r); err != nil {
			s.log.Error("hold template content", "template", r.ID, "err", err)
		}
	}
	return s, nil
}

func (s *Service) load() error {
	ents, err := os.ReadDir(filepath.Join(s.cfg.Dir, "records"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.cfg.Dir, "records", e.Name()))
		if err != nil {
			return err
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			s.log.Warn("unreadable template record", "file", e.Name(), "err", err)
			continue
		}
		for _, b := range r.Builds {
			switch {
			case b.Status == StatusBuilding && b.Published != nil:
				// Killed after publishing its complete image, before
				// recording the outcome: it is ready.
				b.Status = StatusReady
				b.FinishedAt = time.Now().UTC()
			case b.Status == StatusBuilding || b.Status == StatusWaiting:
				b.Status = StatusError
				b.Reason = &Reason{Message: "the build was interrupted (daemon restart)"}
				b.FinishedAt = time.Now().UTC()
			}
		}
		migrateTags(&r)
		migrateContent(&r)
		s.records[r.ID] = &r
		s.saveLocked(&r)
	}
	return nil
}

// saveLocked writes a record atomically, and its row in a cluster's
// store (homes.go); s.mu held.
func (s *Service) saveLocked(r *Record) error {
	if err := s.putHomeLocked(context.Background(), r); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	p := filepath.Join(s.cfg.Dir, "records", r.ID+".json")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// Request is POST /v3/templates: a name (name or name:tag), extra tags and
// limits.
type Request struct {
	Name     string   `json:"name"`
	Tags     []string `json:"tags"`
	CPUCount int      `json:"cpuCount"`
	MemoryMB int      `json:"memoryMB"`
}

// splitName parses "name[:tag]".
func splitName(full string) (name, tag string, err error) {
	name, tag, _ = strings.Cut(full, ":")
	if name == "" || len(full) > MaxNameLength || strings.ContainsAny(name, "/ \t\n") {
		return "", "", fmt.Errorf("template name %q: want 1..%d characters without / or spaces: %w", full, MaxNameLength, errdefs.ErrInvalidArgument)
	}
	return name, tag, nil
}

// RequestBuild registers a build of the template called req.Name (created
// when new) and returns the record and the new build's id.
func (s *Service) RequestBuild(ctx context.Context, req Request) (*Record, string, error) {
	name, tag, err := splitName(req.Name)
	if err != nil {
		return nil, "", err
	}
	tags := req.Tags
	if tag != "" {
		tags = append([]string{tag}, tags...)
	}
	if len(tags) == 0 {
		tags = []string{"default"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byNameLocked(name)
	isNew := r == nil
	if isNew {
		if t, err := s.cfg.Store.GetTemplate(ctx, name); err == nil {
			return nil, "", fmt.Errorf("template name %q is taken by template %s: %w", name, t.ID, errdefs.ErrAlreadyExists)
		}
		now := time.Now().UTC()
		r = &Record{ID: runtime.NewID(), Names: []string{name}, CreatedAt: now}
		s.records[r.ID] = r
	}
	if id := s.running[r.ID]; id != "" {
		return nil, "", fmt.Errorf("template %s is already building (build %s): %w", name, id, errdefs.ErrConflict)
	}
	if err := checkTags(tags); err != nil {
		return nil, "", err
	}
	r.CPUCount, r.MemoryMB = req.CPUCount, req.MemoryMB
	b := &Build{ID: newBuildID(), Status: StatusWaiting, CreatedAt: time.Now().UTC(), Tags: tags}
	r.Builds = append(r.Builds, b)
	r.UpdatedAt = b.CreatedAt
	if err := s.saveLocked(r); err != nil {
		r.Builds = r.Builds[:len(r.Builds)-1]
		if isNew { // another node made the name meanwhile: nothing of it stays
			delete(s.records, r.ID)
		}
		return nil, "", err
	}
	return cloneRecord(r), b.ID, nil
}

func newBuildID() string {
	id := runtime.NewID()
	return id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:]
}

// byNameLocked finds a record by id, name or name:tag.
func (s *Service) byNameLocked(ref string) *Record {
	if r, ok := s.records[ref]; ok {
		return r
	}
	name, tag, _ := strings.Cut(ref, ":")
	for _, r := range s.records {
		if len(r.Names) > 0 && r.Names[0] == name && (tag == "" || r.TagBuilds[tag].BuildID != "") {
			return r
		}
	}
	return nil
}

// Get returns a template record by id, name or name:tag.
func (s *Service) Get(ctx context.Context, ref string) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byNameLocked(ref)
	if r == nil {
		return nil, fmt.Errorf("template %q: %w", ref, errdefs.ErrNotFound)
	}
	return cloneRecord(r), nil
}

// List returns every template record, oldest first (in a cluster, the
// other nodes' too, as they last wrote them).
func (s *Service) List(ctx context.Context) []*Record {
	s.mu.Lock()
	out := make([]*Record, 0, len(s.records))
	for _, r := range s.records {
		out = append(out, cloneRecord(r))
	}
	s.mu.Unlock()
	out = append(out, s.othersRecords(ctx)...)
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// Status returns a build and up to limit of its log entries from offset.
func (s *Service) Status(ctx context.Context, templateID, buildID string) (*Build, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byNameLocked(templateID)
	if r == nil {
		return nil, fmt.Errorf("template %q: %w", templateID, errdefs.ErrNotFound)
	}
	for _, b := range r.Builds {
		if b.ID == buildID {
			c := *b
			c.Logs = append([]LogEntry(nil), b.Logs...)
			return &c, nil
		}
	}
	return nil, fmt.Errorf("build %q of template %s: %w", buildID, templateID, errdefs.ErrNotFound)
}

// Delete removes a template: its record and names go, and its layers and
// images with them unless running or paused sandboxes, snapshots or other
// templates still hold them (then they go with their last holder).
func (s *Service) Delete(ctx context.Context, ref string) error {
	id, err := s.forget(ctx, ref)
	if err != nil {
		return err
	}
	// Its pooled sandboxes go (and let go of its content) before it does.
	s.reconcilePools(ctx)
	if err := s.content.Release(ctx, templateHolder(id)); err != nil {
		s.log.Error("release a deleted template's content", "template", id, "err", err)
	}
	return nil
}

// forget removes a template's record and store templates and returns its
// id.
func (s *Service) forget(ctx context.Context, ref string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byNameLocked(ref)
	if r == nil {
		return "", fmt.Errorf("template %q: %w", ref, errdefs.ErrNotFound)
	}
	if id := s.running[r.ID]; id != "" {
		return "", fmt.Errorf("template %s is building (build %s): %w", r.ID, id, errdefs.ErrConflict)
	}
	if s.shared() { // first: a record another node took over is not this one's to delete
		if err := s.cfg.Store.DeleteBuildRecord(ctx, r.ID, s.cfg.NodeID); err != nil {
			return "", err
		}
	}
	for _, id := range storeIDsLocked(r) {
		if err := s.cfg.Store.DeleteTemplate(ctx, id); err != nil && !errdefs.IsNotFound(err) {
			return "", err
		}
	}
	delete(s.records, r.ID)
	os.Remove(filepath.Join(s.cfg.Dir, "records", r.ID+".json"))
	if err := s.cfg.Uploads.Remove(r.ID); err != nil {
		s.log.Warn("remove a deleted template's uploads", "template", r.ID, "err", err)
	}
	s.log.Info("template deleted", "template", r.ID, "names", r.Names)
	return r.ID, nil
}

func cloneRecord(r *Record) *Record {
	c := *r
	c.Names = append([]string(nil), r.Names...)
	c.Tags = append([]string(nil), r.Tags...)
	c.TagBuilds = maps.Clone(r.TagBuilds)
	c.Builds = nil
	for _, b := range r.Builds {
		bc := *b
		bc.Logs = nil
		c.Builds = append(c.Builds, &bc)
	}
	return &c
}

// BuiltinInfo describes a template forkbox ships (base, code interpreter).
type BuiltinInfo struct {
	ID                             string
	Aliases                        []string
	CPUCount, MemoryMB, DiskSizeMB int
	Version                        string
	CreatedAt                      time.Time
}

func builtinInfo(t *store.Template) *BuiltinInfo {
	return &BuiltinInfo{ID: t.ID, Aliases: t.Aliases, CPUCount: t.CPUCount, MemoryMB: t.MemoryMB, DiskSizeMB: t.DiskSizeMB, Version: t.Version, CreatedAt: t.CreatedAt}
}

// Builtin returns a template forkbox ships, by id or alias; snapshots and
// unknown names are ErrNotFound.
func (s *Service) Builtin(ctx context.Context, idOrAlias string) (*BuiltinInfo, error) {
	t, err := s.cfg.Store.GetTemplate(ctx, idOrAlias)
	if err != nil {
		return nil, err
	}
	if t.Kind != store.KindTemplate {
		return nil, fmt.Errorf("%s is a snapshot: %w", idOrAlias, errdefs.ErrNotFound)
	}
	return builtinInfo(t), nil
}

// Builtins lists the templates forkbox ships: stored templates that are
// not user-built.
func (s *Service) Builtins(ctx context.Context) ([]*BuiltinInfo, error) {
	all, err := s.cfg.Store.ListTemplates(ctx, store.KindTemplate)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := map[string]bool{}
	for _, r := range s.records {
		for _, id := range storeIDsLocked(r) {
			mine[id] = true
		}
	}
	var out []*BuiltinInfo
	for _, t := range all {
		if !mine[t.ID] {
			out = append(out, builtinInfo(t))
		}
	}
	return out, nil
}

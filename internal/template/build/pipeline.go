package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/forkbox/forkbox/internal/errdefs"
	"github.com/forkbox/forkbox/internal/template/dockerfile"
)

// job is one build in progress.
type job struct {
	s        *Service
	tplID    string
	buildID  string
	spec     Spec
	step     string // "base", "1"…, "finalize": where log lines and errors belong
	key      string // cache key of the build so far
	layer    string // content key of the current layer (key, unless ENV, WORKDIR or USER followed)
	rootfs   string // the current layer's directory
	env      map[string]string
	envOrder []string
	user     string
	workdir  string
	userSet  bool
	wdSet    bool
	forced   bool
	box      *box
	hits     int
	work     string
}

// stepError is a build failure attributed to a step.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// Start runs build buildID of template templateID in the background.
// Problems with the request itself are returned at once.
func (s *Service) Start(ctx context.Context, templateID, buildID string, spec Spec) error {
	if err := checkSpec(spec); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byNameLocked(templateID)
	if r == nil {
		return fmt.Errorf("template %q: %w", templateID, errdefs.ErrNotFound)
	}
	b := findBuild(r, buildID)
	if b == nil {
		return fmt.Errorf("build %q of template %s: %w", buildID, templateID, errdefs.ErrNotFound)
	}
	if id := s.running[r.ID]; id != "" {
		return fmt.Errorf("template %s is already building (build %s): %w", r.ID, id, errdefs.ErrConflict)
	}
	if b.Status != StatusWaiting {
		return fmt.Errorf("build %s was already started: %w", buildID, errdefs.ErrConflict)
	}
	b.Status, b.Steps = StatusBuilding, len(spec.Steps)
	s.running[r.ID] = buildID
	s.saveLocked(r)
	j := &job{s: s, tplID: r.ID, buildID: buildID, spec: spec, step: "base", env: map[string]string{}}
	go j.run(context.WithoutCancel(ctx))
	return nil
}

func checkSpec(spec Spec) error {
	if reg := spec.FromImageRegistry; reg != nil {
		switch reg.Type {
		case "registry", "":
		case "aws", "gcp":
			return fmt.Errorf("fromImageRegistry type %q needs that cloud's credentials service, which forkbox does not use: give the registry's username and password with type \"registry\": %w", reg.Type, errdefs.ErrInvalidArgument)
		default:
			return fmt.Errorf("fromImageRegistry type %q is unknown: %w", reg.Type, errdefs.ErrInvalidArgument)
		}
	}
	if spec.FromImage != "" && spec.FromTemplate != "" {
		return fmt.Errorf("give fromImage or fromTemplate, not both: %w", errdefs.ErrInvalidArgument)
	}
	for i, st := range spec.Steps {
		switch st.Type {
		case dockerfile.StepRun, dockerfile.StepCopy, dockerfile.StepEnv, dockerfile.StepWorkdir, dockerfile.StepUser:
		default:
			return fmt.Errorf("step %d: unknown type %q: %w", i+1, st.Type, errdefs.ErrInvalidArgument)
		}
		if len(st.Args) == 0 {
			return fmt.Errorf("step %d (%s): no arguments: %w", i+1, st.Type, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

func findBuild(r *Record, id string) *Build {
	for _, b := range r.Builds {
		if b.ID == id {
			return b
		}
	}
	return nil
}

// logf appends a build log line.
func (j *job) logf(level, format string, args ...any) {
	j.s.appendLog(j.tplID, j.buildID, LogEntry{Timestamp: time.Now().UTC(), Level: level, Step: j.step, Message: fmt.Sprintf(format, args...)})
}

func (s *Service) appendLog(tplID, buildID string, e LogEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.records[tplID]; r != nil {
		if b := findBuild(r, buildID); b != nil {
			b.Logs = append(b.Logs, e)
			s.checkpointLocked(r, e)
		}
	}
}

func (j *job) run(ctx context.Context) {
	start := time.Now()
	j.work = filepath.Join(j.s.cfg.Dir, "work", j.buildID)
	err := j.pipeline(ctx)
	if j.box != nil {
		j.box.close(ctx)
	}
	os.RemoveAll(j.work)
	if err == nil {
		j.logf("info", "Build finished in %s (%d of %d steps cached)", time.Since(start).Round(time.Millisecond), j.hits, len(j.spec.Steps))
	}
	j.s.finish(ctx, j, err)
	if err == nil && j.s.cfg.Pools != nil {
		j.s.cfg.Pools.WarmPool(ctx, j.tplID)
	}
	// The template holds what its kept builds made (finish); the build
	// lets go of the rest: older builds' layers and a failed build's own
	// go now, unless something else holds them (pooled sandboxes of an
	// older image hold it until the pools are reconciled).
	j.s.reconcilePools(ctx)
	if err := j.s.content.Release(context.WithoutCancel(ctx), j.holder()); err != nil {
		j.s.log.Error("release a build's content", "build", j.buildID, "err", err)
	}
}

func (j *job) pipeline(ctx context.Context) error {
	j.forced = j.spec.Force
	if err := j.base(ctx); err != nil {
		return &stepError{"base", err}
	}
	for i, st := range j.spec.Steps {
		j.step = fmt.Sprint(i + 1)
		if st.Force {
			j.forced = true
		}
		if err := j.runStep(ctx, st); err != nil {
			return &stepError{j.step, err}
		}
	}
	j.step = "finalize"
	if err := j.finalize(ctx); err != nil {
		return &stepError{"finalize", err}
	}
	return nil
}

// hashKey names a layer by its cache key (and, for a forced step, by the
// build too: a forced layer is new, never written over one that templates
// and sandboxes may still use).
func (j *job) hashKey(parts ...string) string {
	if j.forced {
		parts = append(parts, "forced:"+j.buildID)
	}
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}

// runStep applies one step: ENV, WORKDIR and USER change the build's
// state; RUN and COPY make a new layer unless it is cached.
func (j *job) runStep(ctx context.Context, st dockerfile.Step) error {
	label := st.Type + " " + strings.Join(st.Args, " ")
	switch st.Type {
	case dockerfile.StepEnv:
		for i := 0; i+1 < len(st.Args); i += 2 {
			j.setEnv(st.Args[i], st.Args[i+1])
		}
		j.key = j.hashKey(StepKey(j.key, st))
		j.logf("info", "[%s/%d] %s", j.step, len(j.spec.Steps), label)
		return nil
	case dockerfile.StepWorkdir:
		j.workdir, j.wdSet = resolveDir(j.workdir, st.Args[0]), true
		j.key = j.hashKey(StepKey(j.key, st))
		j.logf("info", "[%s/%d] %s", j.step, len(j.spec.Steps), label)
		return nil
	case dockerfile.StepUser:
		j.user, j.userSet = st.Args[0], true
		j.key = j.hashKey(StepKey(j.key, st))
		j.logf("info", "[%s/%d] %s", j.step, len(j.spec.Steps), label)
		return nil
	}
	key, err := j.layerKey(st)
	if err != nil {
		return err
	}
	if j.useLayer(ctx, key) {
		j.hits++
		j.logf("info", "CACHED [%s/%d] %s", j.step, len(j.spec.Steps), label)
		return nil
	}
	j.logf("info", "[%s/%d] %s", j.step, len(j.spec.Steps), label)
	t0 := time.Now()
	scratch, copied, err := j.copyLayer()
	if err != nil {
		return err
	}
	if st.Type == dockerfile.StepRun {
		err = j.run1(ctx, scratch, st)
	} else {
		err = j.copy1(ctx, filepath.Join(j.work, scratch), st)
	}
	if err != nil {
		return err
	}
	if err := j.commitLayer(ctx, filepath.Join(j.work, scratch), key, copied); err != nil {
		return err
	}
	j.logf("info", "[%s/%d] done in %s", j.step, len(j.spec.Steps), time.Since(t0).Round(time.Millisecond))
	return nil
}

// layerKey is the cache key of a RUN or COPY step's layer. A COPY's
// files are named by the digest of what this template uploaded, not by
// the client's filesHash (see Uploads).
func (j *job) layerKey(st dockerfile.Step) (string, error) {
	if st.Type == dockerfile.StepCopy {
		d, err := j.s.cfg.Uploads.Digest(j.tplID, st.FilesHash)
		if err != nil {
			return "", fmt.Errorf("the files of COPY %s (filesHash %q) were not uploaded: %w", st.Args[0], st.FilesHash, errdefs.ErrInvalidArgument)
		}
		st.FilesHash = d
	}
	return j.hashKey(StepKey(j.key, st)), nil
}

func (j *job) setEnv(k, v string) {
	if _, ok := j.env[k]; !ok {
		j.envOrder = append(j.envOrder, k)
	}
	j.env[k] = v
}

func (j *job) envKey() string {
	var b strings.Builder
	for _, k := range j.envOrder {
		b.WriteString(k + "=" + j.env[k] + "\x00")
	}
	return b.String()
}

func resolveDir(cur, dir string) string {
	if strings.HasPrefix(dir, "/") {
		return filepath.Clean(dir)
	}
	if cur == "" {
		cur = "/"
	}
	return filepath.Join(cur, dir)
}

// finish records the build's outcome.
func (s *Service) finish(ctx context.Context, j *job, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, j.tplID)
	delete(s.ckpts, j.tplID)
	r := s.records[j.tplID]
	if r == nil {
		return
	}
	b := findBuild(r, j.buildID)
	if b == nil {
		return
	}
	b.FinishedAt, b.CacheHits = time.Now().UTC(), j.hits
	if err != nil {
		var se *stepError
		step := "finalize"
		if errors.As(err, &se) {
			step = se.step
		}
		b.Status, b.Reason = StatusError, &Reason{Message: err.Error(), Step: step}
		b.Logs = append(b.Logs, LogEntry{Timestamp: b.FinishedAt, Level: "error", Step: step, Message: "Build failed: " + err.Error()})
		s.log.Warn("template build failed", "template", j.tplID, "build", j.buildID, "step", step, "err", err)
	} else {
		b.Status = StatusReady
		s.log.Info("template build ready", "template", j.tplID, "build", j.buildID, "cached", j.hits)
	}
	s.saveLocked(r)
	if err := s.holdLocked(ctx, r); err != nil {
		s.log.Error("hold template content", "template", r.ID, "err", err)
	}
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/forkbox/forkbox/client"
)

// op is one operation a round may start.
type op struct {
	name string
	do   func(ctx context.Context, c *client.Client) error
}

// pick draws an operation that fits what the daemon holds: creates and
// clones only below maxLive, snapshots only below maxSnapshots, builds
// only below maxTemplates. Targets are drawn now, so the operations of one
// round often race on one sandbox or template.
func (r *run) pick(live []client.SandboxInfo, snaps []client.SnapshotInfo, tpls []client.Template) op {
	choices := r.templateOps(tpls, len(live))
	if len(live) < maxLive {
		choices = append(choices, r.createOp(), r.createOp())
		if len(snaps) > 0 {
			choices = append(choices, r.restoreOp(snaps))
		}
	}
	if len(live) > 0 {
		sb := live[r.rng.IntN(len(live))]
		choices = append(choices, r.sandboxOps(sb, len(live), snaps)...)
	}
	if len(snaps) > 0 {
		s := snaps[r.rng.IntN(len(snaps))]
		choices = append(choices, op{"delete-snapshot", func(ctx context.Context, c *client.Client) error {
			return c.DeleteSnapshot(ctx, s.SnapshotID)
		}})
	}
	return choices[r.rng.IntN(len(choices))]
}

// chaosVolume is the volume some created sandboxes mount.
const chaosVolume = "chaos-vol"

// createOp creates a sandbox of the base template; one in three lives a
// second or two (a TTL expiry races the round's other operations), and half
// of those pause instead of dying. One in four asks for another disk size:
// its first create boots and captures an image of that shape, which a kill
// -9 may interrupt (template.go accounts for it).
func (r *run) createOp() op {
	o := client.CreateOptions{TemplateID: "base", Timeout: 10 * time.Minute}
	if r.rng.IntN(3) == 0 {
		o.Timeout = time.Duration(1+r.rng.IntN(2)) * time.Second
		o.AutoPause = r.rng.IntN(2) == 0
	}
	if r.rng.IntN(4) == 0 {
		o.DiskSizeMB = shapedDisks[r.rng.IntN(len(shapedDisks))]
	}
	// One in four mounts the run's volume: its attach directory and binds
	// must come and go with the sandbox through every operation.
	withVolume := r.rng.IntN(4) == 0
	if withVolume {
		o.VolumeMounts = []client.VolumeMount{{Name: chaosVolume, Path: "/mnt/vol"}}
	}
	return op{"create", func(ctx context.Context, c *client.Client) error {
		if withVolume {
			if _, err := c.CreateVolume(ctx, chaosVolume); err != nil && !client.IsConflict(err) {
				return err
			}
		}
		_, err := c.CreateSandbox(ctx, o)
		return err
	}}
}

// restoreOp starts a sandbox from a snapshot.
func (r *run) restoreOp(snaps []client.SnapshotInfo) op {
	s := snaps[r.rng.IntN(len(snaps))]
	return op{"restore", func(ctx context.Context, c *client.Client) error {
		_, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: s.SnapshotID, Timeout: 10 * time.Minute})
		return err
	}}
}

// sandboxOps are the operations on sandbox sb.
func (r *run) sandboxOps(sb client.SandboxInfo, nLive int, snaps []client.SnapshotInfo) []op {
	id := sb.SandboxID
	ttl := time.Duration(1+r.rng.IntN(2)) * time.Second
	count := 1 + r.rng.IntN(max(1, min(2, maxLive-nLive)))
	ops := []op{
		{"kill", func(ctx context.Context, c *client.Client) error { return c.KillSandbox(ctx, id) }},
		{"pause", func(ctx context.Context, c *client.Client) error { return c.Pause(ctx, id) }},
		{"resume", func(ctx context.Context, c *client.Client) error {
			_, err := c.Connect(ctx, id, 10*time.Minute)
			return err
		}},
		{"ttl", func(ctx context.Context, c *client.Client) error { return c.SetTimeout(ctx, id, ttl) }},
	}
	if len(snaps) < maxSnapshots {
		ops = append(ops, op{"snapshot", func(ctx context.Context, c *client.Client) error {
			_, err := c.Snapshot(ctx, id, "")
			return err
		}})
	}
	if nLive < maxLive {
		ops = append(ops, op{"clone", func(ctx context.Context, c *client.Client) error {
			_, err := c.Clone(ctx, id, client.CloneOptions{Count: count})
			return err
		}})
	}
	if i := slices.IndexFunc(snaps, func(s client.SnapshotInfo) bool { return s.SandboxID == id }); i >= 0 {
		snap := snaps[i].SnapshotID
		ops = append(ops, op{"rollback", func(ctx context.Context, c *client.Client) error {
			_, err := c.Rollback(ctx, id, snap)
			return err
		}})
	}
	return ops
}

// stats counts the outcomes of operations by name and answer class.
type stats struct {
	mu sync.Mutex
	n  map[string]int // "op:outcome" → count
	// bad are the 5xx answers other than a 503 with a message, calm the
	// 503s of rounds with no fault in or just before them.
	bad, calm []string
	// first is the first error answer of each "op:outcome".
	first map[string]string
}

// add counts op name's answer err; faulty says whether a node was killed
// or the database restarted in its round or the one before.
func (s *stats) add(name string, err error, faulty bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	key := name + ":" + outcome(err)
	s.n[key]++
	if err != nil && s.first[key] == "" {
		if s.first == nil {
			s.first = map[string]string{}
		}
		s.first[key] = err.Error()
	}
	var ae *client.Error
	switch {
	case !errors.As(err, &ae) || ae.Status < 500:
	case ae.Status != 503 || strings.TrimSpace(ae.Message) == "":
		s.bad = append(s.bad, fmt.Sprintf("%s: %v", name, err))
	case !faulty:
		s.calm = append(s.calm, fmt.Sprintf("%s: %v", name, err))
	}
}

// badServerErrors are the 5xx answers that were not a 503 saying why, and
// the 503s of calm rounds.
func (s *stats) badServerErrors() (bad, calm []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bad), slices.Clone(s.calm)
}

// outcome classifies an operation's answer: ok, an API status, or "down"
// (the daemon was killed under it).
func outcome(err error) string {
	var ae *client.Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ae):
		return fmt.Sprint(ae.Status)
	default:
		return "down"
	}
}

func (s *stats) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for k, v := range s.n {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// firstErrors lists the first error answer of each operation and outcome.
func (s *stats) firstErrors() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range slices.Sorted(maps.Keys(s.first)) {
		out = append(out, fmt.Sprintf("%s: %s", k, s.first[k]))
	}
	return strings.Join(out, "\n")
}

// serverErrors lists the operations answered with a 5xx.
func (s *stats) serverErrors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, v := range s.n {
		if _, code, _ := strings.Cut(k, ":"); strings.HasPrefix(code, "5") {
			out = append(out, fmt.Sprintf("%s=%d", k, v))
		}
	}
	slices.Sort(out)
	return out
}

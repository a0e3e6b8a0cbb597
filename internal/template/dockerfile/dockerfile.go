// Package dockerfile turns a Dockerfile into E2B template build steps — the
// {fromImage, steps, startCmd, readyCmd} an E2B SDK's Template() builder
// sends — so `forkbox template build -f Dockerfile` and the SDKs'
// fromDockerfile() make the same template.
//
// Parsing (line continuations, JSON and shell forms, heredocs, the escape
// directive, variable expansion) is BuildKit's; this package maps the
// instructions the way the E2B SDK does: one FROM, the steps start as root
// in /, ARG is kept as ENV, each COPY/ADD source is its own COPY step,
// CMD/ENTRYPOINT become the start command (ready after `sleep 20`, as the
// SDK's waitForTimeout(20000)), and the steps end as `user` in /home/user
// unless the Dockerfile sets USER/WORKDIR.
package dockerfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/forkbox/forkbox/internal/errdefs"
)

// Step types of the E2B build API.
const (
	StepRun     = "RUN"
	StepCopy    = "COPY"
	StepEnv     = "ENV"
	StepWorkdir = "WORKDIR"
	StepUser    = "USER"
)

// Step is one build step as the E2B API carries it: RUN [cmd, user?],
// COPY [src, dest, user, mode], ENV [k1, v1, …], WORKDIR [dir], USER [user].
type Step struct {
	Type      string   `json:"type"`
	Args      []string `json:"args"`
	FilesHash string   `json:"filesHash,omitempty"`
	Force     bool     `json:"force,omitempty"`
}

// Template is what a Dockerfile builds.
type Template struct {
	FromImage string   `json:"fromImage"`
	Steps     []Step   `json:"steps"`
	StartCmd  string   `json:"startCmd,omitempty"`
	ReadyCmd  string   `json:"readyCmd,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}

// Options tunes Parse.
type Options struct {
	// BuildArgs override ARG defaults (docker build --build-arg).
	BuildArgs map[string]string
}

// DefaultReadyCmd is what the E2B SDK waits with after a Dockerfile's
// CMD/ENTRYPOINT (waitForTimeout(20_000)).
const DefaultReadyCmd = "sleep 20"

// Parse reads a Dockerfile. Errors are errdefs.ErrInvalidArgument and name
// the line.
func Parse(r io.Reader, opts Options) (*Template, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read Dockerfile: %w", err)
	}
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		return nil, invalid(err)
	}
	if !hasFrom(res.AST) {
		return nil, fmt.Errorf("dockerfile: no FROM instruction (a template starts from an image): %w", errdefs.ErrInvalidArgument)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return nil, invalid(err)
	}
	switch {
	case len(stages) == 0:
		return nil, fmt.Errorf("dockerfile: no FROM instruction: %w", errdefs.ErrInvalidArgument)
	case len(stages) > 1:
		return nil, fmt.Errorf("dockerfile: line %d: multi-stage Dockerfiles are not supported (a second FROM): %w",
			line(stages[1].Location), errdefs.ErrInvalidArgument)
	}
	c := &converter{lex: shell.NewLex(res.EscapeToken), args: opts.BuildArgs, vars: map[string]string{}, workdir: "/"}
	for _, w := range res.Warnings {
		c.warn(w.Location, w.Short)
	}
	if err := c.from(stages[0], metaArgs); err != nil {
		return nil, err
	}
	c.emit(StepUser, "root")
	c.emit(StepWorkdir, "/")
	for _, cmd := range stages[0].Commands {
		if err := c.command(cmd); err != nil {
			return nil, fmt.Errorf("dockerfile: line %d: %s: %w", line(cmd.Location()), strings.ToUpper(cmd.Name()), err)
		}
	}
	if !c.userSet {
		c.emit(StepUser, "user")
	}
	if !c.workdirSet {
		c.emit(StepWorkdir, "/home/user")
	}
	c.t.StartCmd = c.startCmd()
	if c.t.StartCmd != "" {
		c.t.ReadyCmd = DefaultReadyCmd
	}
	return &c.t, nil
}

func hasFrom(ast *parser.Node) bool {
	for _, n := range ast.Children {
		if strings.EqualFold(n.Value, "from") {
			return true
		}
	}
	return false
}

func invalid(err error) error {
	return fmt.Errorf("dockerfile: %v: %w", err, errdefs.ErrInvalidArgument)
}

func line(loc []parser.Range) int {
	if len(loc) == 0 {
		return 0
	}
	return loc[0].Start.Line
}

// converter is the state of one Parse.
type converter struct {
	t                   Template
	lex                 *shell.Lex
	args                map[string]string // --build-arg values
	vars                map[string]string // ARG and ENV values so far, for expansion
	order               []string
	workdir             string
	userSet, workdirSet bool
	cmd, entrypoint     *instructions.ShellDependantCmdLine
}

func (c *converter) emit(typ string, args ...string) {
	c.t.Steps = append(c.t.Steps, Step{Type: typ, Args: args})
}

func (c *converter) warn(loc *parser.Range, msg string) {
	if loc != nil {
		msg = fmt.Sprintf("line %d: %s", loc.Start.Line, msg)
	}
	c.t.Warnings = append(c.t.Warnings, msg)
}

func (c *converter) set(k, v string) {
	if _, ok := c.vars[k]; !ok {
		c.order = append(c.order, k)
	}
	c.vars[k] = v
}

func (c *converter) env() shell.EnvGetter {
	kv := make([]string, 0, len(c.order))
	for _, k := range c.order {
		kv = append(kv, k+"="+c.vars[k])
	}
	return shell.EnvsFromSlice(kv)
}

func (c *converter) expand(word string) (string, error) {
	s, _, err := c.lex.ProcessWord(word, c.env())
	return s, err
}

// from takes the base image, expanding the ARGs declared before FROM.
func (c *converter) from(st instructions.Stage, metaArgs []instructions.ArgCommand) error {
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			c.set(kv.Key, c.argValue(kv))
		}
	}
	base, err := c.expand(st.BaseName)
	if err != nil {
		return fmt.Errorf("dockerfile: line %d: FROM: %v: %w", line(st.Location), err, errdefs.ErrInvalidArgument)
	}
	switch {
	case base == "" || base == "scratch":
		return fmt.Errorf("dockerfile: line %d: FROM %q: a template needs a base image with a shell: %w",
			line(st.Location), base, errdefs.ErrInvalidArgument)
	case st.Platform != "":
		c.warn(&st.Location[0], "FROM --platform is ignored: images are pulled for this host's platform")
	}
	c.t.FromImage = base
	// ARGs before FROM are visible to FROM only (Docker's scoping).
	c.vars, c.order = map[string]string{}, nil
	return nil
}

func (c *converter) argValue(kv instructions.KeyValuePairOptional) string {
	if v, ok := c.args[kv.Key]; ok {
		return v
	}
	if kv.Value != nil {
		v, err := c.expand(*kv.Value)
		if err == nil {
			return v
		}
		return *kv.Value
	}
	return ""
}

// errUnsupported marks instructions and flags forkbox cannot build.
var errUnsupported = errors.New("not supported")

// envName is what an ENV/ARG key must look like.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// resolveWorkdir applies a WORKDIR to the current one (relative paths
// are relative to it, as in Docker).
func (c *converter) resolveWorkdir(dir string) string {
	if !path.IsAbs(dir) {
		dir = path.Join(c.workdir, dir)
	}
	return path.Clean(dir)
}

package codeinterp

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

const (
	langPython     = "python"
	langJavaScript = "javascript"
	langTypeScript = "typescript"
	langBash       = "bash"
	langR          = "r"
	langJava       = "java"
)

// kernelSpecs maps each language to its kernel.
var kernelSpecs = map[string]*kernelSpec{
	langPython: pythonSpec, langJavaScript: javascriptSpec, langTypeScript: typescriptSpec,
	langBash: bashSpec, langR: rSpec, langJava: javaSpec,
}

// errUnsupportedLanguage is returned for languages with no kernel here.
var errUnsupportedLanguage = errors.New("unsupported language")

// errBadDir is returned for a working directory that does not exist.
var errBadDir = errors.New("not a directory")

// errNotFound is returned for unknown context ids.
var errNotFound = errors.New("context not found")

// normalizeLanguage maps client spellings to a kernel language, as E2B does
// ("" is Python).
func normalizeLanguage(lang string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(lang)) {
	case "", "python", "python3", "py":
		return langPython, nil
	case "js", "javascript", "node":
		return langJavaScript, nil
	case "ts", "typescript":
		return langTypeScript, nil
	case "bash", "sh", "shell":
		return langBash, nil
	case "r":
		return langR, nil
	case "java":
		return langJava, nil
	default:
		return "", fmt.Errorf("%w %q (supported: python, javascript (js), typescript (ts), r, java, bash)", errUnsupportedLanguage, lang)
	}
}

// kernel runs cells for one context. Implementations are long-lived
// processes; execute is never called concurrently, close may be.
type kernel interface {
	// execute runs one cell, passing each wire event (a JSON object, no
	// newline) to emit. When ctx is cancelled the cell is interrupted.
	// baseEnv, when non-nil, is applied to the context permanently first.
	execute(ctx context.Context, req cellRequest, emit func([]byte)) error
	// alive reports whether the process can still run cells.
	alive() bool
	// close kills the process; a running execute returns soon after.
	close()
}

// cellRequest is one execution as a kernel sees it.
type cellRequest struct {
	Code    string
	EnvVars map[string]string
	BaseEnv map[string]string
	// noEnvd skips loading envd's environment: the prewarm cell runs before
	// the sandbox has one (it is set by /init after every restore).
	noEnvd bool
	// silent runs the cell as bookkeeping: no output, no execution count.
	silent bool
}

// codeContext is one isolated interpreter state.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`

	srv *Server
	run sync.Mutex // held for the whole of an execution or a restart
	// k is the current kernel; written under run, read under run or kmu.
	kmu       sync.Mutex
	k         kernel
	envLoaded bool // the envd environment was applied; guarded by run
}

func (c *codeContext) kernel() kernel {
	c.kmu.Lock()
	defer c.kmu.Unlock()
	return c.k
}

func (c *codeContext) setKernel(k kernel) {
	c.kmu.Lock()
	c.k = k
	c.kmu.Unlock()
}

// close stops the context's kernel.
func (c *codeContext) close() {
	if k := c.kernel(); k != nil {
		k.close()
	}
}

// restart replaces the kernel with a fresh one, interrupting any running
// cell by killing its process first.
func (c *codeContext) restart(ctx context.Context) error {
	if r, ok := c.kernel().(interface{ markRestart() }); ok {
		r.markRestart()
	}
	c.close()
	c.run.Lock()
	defer c.run.Unlock()
	return c.startKernel(ctx)
}

// startKernel starts a new kernel; the caller holds run.
func (c *codeContext) startKernel(ctx context.Context) error {
	k, err := c.srv.startJupyter(ctx, kernelSpecs[c.Language], c.Cwd)
	if err != nil {
		return err
	}
	c.setKernel(k)
	c.envLoaded = false
	return nil
}

// execute runs one cell; a kernel that died (killed, or the user's code
// exited it) is replaced first, like a Jupyter kernel's auto-restart.
func (c *codeContext) execute(ctx context.Context, req cellRequest, token string, emit func([]byte)) error {
	c.run.Lock()
	defer c.run.Unlock()
	if k := c.kernel(); k == nil || !k.alive() {
		if k != nil {
			k.close()
		}
		if err := c.startKernel(ctx); err != nil {
			return err
		}
	}
	if !c.envLoaded && !req.noEnvd && c.srv.cfg.EnvdURL != "" {
		env, err := fetchEnvdEnv(ctx, c.srv.cfg.EnvdURL, token)
		if err != nil {
			c.srv.log.Warn("code interpreter: cannot read envd environment", "err", err)
		} else {
			req.BaseEnv = env
			c.envLoaded = true
		}
	}
	return c.kernel().execute(ctx, req, emit)
}

// newID returns a random UUID-formatted context id.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// createContext starts a new context for lang in cwd ("" = default).
func (s *Server) createContext(ctx context.Context, lang, cwd string) (*codeContext, error) {
	return s.newContext(ctx, lang, cwd, true)
}

// newContext makes a context for lang in cwd ("" = default) and starts
// its kernel unless lazy start is asked (start false): then its first
// cell starts it, as after a kernel's death.
func (s *Server) newContext(ctx context.Context, lang, cwd string, start bool) (*codeContext, error) {
	lang, err := normalizeLanguage(lang)
	if err != nil {
		return nil, err
	}
	if cwd == "" {
		cwd = s.defaultWorkDir()
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("working directory %q: %w", cwd, errBadDir)
	}
	c := &codeContext{ID: newID(), Language: lang, Cwd: cwd, srv: s}
	if start {
		c.run.Lock()
		err = c.startKernel(ctx)
		c.run.Unlock()
		if err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	s.contexts[c.ID] = c
	s.order = append(s.order, c.ID)
	s.mu.Unlock()
	s.log.Info("code interpreter: context created", "id", c.ID, "language", lang, "cwd", cwd)
	return c, nil
}

// lookup returns the context with id.
func (s *Server) lookup(id string) (*codeContext, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.contexts[id]
	if !ok {
		return nil, fmt.Errorf("context %s: %w", id, errNotFound)
	}
	return c, nil
}

// defaultContext returns the language's default context, creating it on
// first use.
func (s *Server) defaultContext(ctx context.Context, lang string) (*codeContext, error) {
	return s.ensureDefault(ctx, lang, true)
}

// defaultContextLazy registers lang's default context without starting
// its kernel (Config.PrewarmJS).
func (s *Server) defaultContextLazy(lang string) (*codeContext, error) {
	return s.ensureDefault(context.Background(), lang, false)
}

func (s *Server) ensureDefault(ctx context.Context, lang string, start bool) (*codeContext, error) {
	lang, err := normalizeLanguage(lang)
	if err != nil {
		return nil, err
	}
	s.defMu.Lock()
	defer s.defMu.Unlock()
	s.mu.Lock()
	id, ok := s.defaults[lang]
	c := s.contexts[id]
	s.mu.Unlock()
	if ok && c != nil {
		return c, nil
	}
	c, err = s.newContext(ctx, lang, "", start)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.defaults[lang] = c.ID
	s.mu.Unlock()
	return c, nil
}

// list returns the contexts in creation order.
func (s *Server) list() []*codeContext {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*codeContext, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.contexts[id])
	}
	return out
}

// remove stops and forgets a context.
func (s *Server) remove(id string) error {
	s.mu.Lock()
	c, ok := s.contexts[id]
	if ok {
		delete(s.contexts, id)
		for i, o := range s.order {
			if o == id {
				s.order = append(s.order[:i], s.order[i+1:]...)
				break
			}
		}
		for lang, d := range s.defaults {
			if d == id {
				delete(s.defaults, lang)
			}
		}
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("context %s: %w", id, errNotFound)
	}
	c.close()
	s.log.Info("code interpreter: context removed", "id", id)
	return nil
}

package codeinterp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// bashLoop is the persistent shell's program. It reads cells from fd 3 as
// three NUL-terminated fields (environment set-up, the cell, environment
// restore), evals them in the shell itself so cd, variables and functions
// persist, and ends each cell with a marker and its exit status on both
// stdout and stderr. stdin is /dev/null so the cell cannot eat the protocol.
// The INT trap keeps the shell alive when an interrupt kills a foreground
// command; a read interrupted by a late signal is retried.
const bashLoop = `exec 3<&0 0</dev/null
trap ':' INT
__fb_m=%s
__fb_next() { IFS= read -r -d '' "$1" <&3; }
while :; do
  __fb_next __fb_pre
  __fb_s=$?
  if [ "$__fb_s" -gt 128 ]; then continue; fi
  [ "$__fb_s" -eq 0 ] || exit 0
  __fb_next __fb_cell || exit 0
  __fb_next __fb_post || exit 0
  eval "$__fb_pre"
  eval "$__fb_cell" 3<&-
  __fb_rc=$?
  eval "$__fb_post"
  printf '%%s%%d\n' "$__fb_m" "$__fb_rc"
  printf '%%s%%d\n' "$__fb_m" "$__fb_rc" >&2
done
`

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// bashKernel is one persistent bash process.
type bashKernel struct {
	p      *proc
	marker []byte
	chunks chan chunk // output of both streams; closed when both end
	grace  time.Duration
	count  int
}

// chunk is output of one stream, or (end) the end-of-cell marker.
type chunk struct {
	stream string // "stdout" or "stderr"
	text   string
	end    bool
	rc     int
}

// startBash starts a shell in cwd.
func (s *Server) startBash(ctx context.Context, cwd string) (kernel, error) {
	acct, err := s.account()
	if err != nil {
		return nil, err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	marker := "\x1eFBEND" + hex.EncodeToString(rnd[:]) + ":"
	script := fmt.Sprintf(bashLoop, shellQuote(marker))
	cmd := exec.Command(s.cfg.Bash, "--noprofile", "--norc", "-c", script)
	p, stdout, stderr, err := startProc(cmd, acct, cwd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.cfg.Bash, err)
	}
	k := &bashKernel{p: p, marker: []byte(marker), chunks: make(chan chunk, 16), grace: s.cfg.InterruptGrace}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); k.read(stdout, "stdout") }()
	go func() { defer wg.Done(); k.read(stderr, "stderr") }()
	go func() { wg.Wait(); close(k.chunks) }()
	return k, nil
}

// read splits one stream into text chunks and end markers.
func (k *bashKernel) read(r io.ReadCloser, stream string) {
	defer r.Close()
	sc := markerScanner{marker: k.marker}
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		sc.feed(buf[:n], func(text string, end bool, rc int) {
			k.chunks <- chunk{stream: stream, text: text, end: end, rc: rc}
		})
		if err != nil {
			return
		}
	}
}

func (k *bashKernel) alive() bool { return k.p.alive() }

func (k *bashKernel) close() { k.p.kill() }

// execute runs one cell; a non-zero exit status becomes an error event
// named ExitError whose value is the status, as Jupyter's bash kernel does.
func (k *bashKernel) execute(ctx context.Context, req cellRequest, emit func([]byte)) error {
	pre, post, err := bashEnvScripts(req.BaseEnv, req.EnvVars)
	if err != nil {
		return err
	}
	if strings.IndexByte(req.Code, 0) >= 0 {
		return &execError{"ValueError", "bash code cannot contain NUL bytes"}
	}
	if _, err := io.WriteString(k.p.stdin, pre+"\x00"+req.Code+"\x00"+post+"\x00"); err != nil {
		k.close()
		return &execError{"DeadKernelError", "the bash process exited; the next execution starts a new one"}
	}
	k.count++
	emit(mustJSON(countEvent{Type: "number_of_executions", ExecutionCount: k.count}))
	rc, err := k.pump(ctx, emit)
	if err != nil {
		return err
	}
	if rc != 0 {
		emit(errorEvent("ExitError", strconv.Itoa(rc), ""))
	}
	return nil
}

// pump forwards output until both streams carried the end marker.
func (k *bashKernel) pump(ctx context.Context, emit func([]byte)) (int, error) {
	ended := map[string]bool{}
	rc := 0
	in := newInterrupter(ctx, k.p, k.grace)
	defer in.stop()
	for len(ended) < 2 {
		select {
		case c, ok := <-k.chunks:
			if !ok {
				k.close()
				return 0, &execError{"DeadKernelError", "the bash process exited; the next execution starts a new one"}
			}
			if c.end {
				ended[c.stream], rc = true, c.rc
			} else if c.text != "" {
				emit(mustJSON(streamEvent{Type: c.stream, Text: c.text, Timestamp: now()}))
			}
		case <-in.done:
			in.start()
		case <-in.repeat:
			in.resend()
		case <-in.expired:
			k.close()
			return 0, errStuck
		}
	}
	return rc, nil
}

// bashEnvScripts builds shell code that sets the permanent base
// environment and this cell's variables, and code that restores the
// previous values of the cell's variables afterwards.
func bashEnvScripts(base, cell map[string]string) (pre, post string, err error) {
	var b, a strings.Builder
	for _, k := range sortedKeys(base) {
		if !envName.MatchString(k) {
			continue // not representable in a shell; skipped like envd does
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(base[k]))
	}
	for _, k := range sortedKeys(cell) {
		if !envName.MatchString(k) {
			return "", "", &execError{"ValueError", fmt.Sprintf("invalid environment variable name %q", k)}
		}
		fmt.Fprintf(&b, "if [ -n \"${%[1]s+x}\" ]; then __fb_o_%[1]s=$%[1]s; __fb_h_%[1]s=1; else __fb_h_%[1]s=0; fi\nexport %[1]s=%[2]s\n", k, shellQuote(cell[k]))
		fmt.Fprintf(&a, "if [ \"$__fb_h_%[1]s\" = 1 ]; then %[1]s=$__fb_o_%[1]s; else unset %[1]s; fi\nunset __fb_o_%[1]s __fb_h_%[1]s\n", k)
	}
	return b.String(), a.String(), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// countEvent and streamEvent are E2B's number_of_executions and
// stdout/stderr events.
type countEvent struct {
	Type           string `json:"type"`
	ExecutionCount int    `json:"execution_count"`
}

type streamEvent struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Timestamp string `json:"timestamp"`
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// markerScanner splits a byte stream at end-of-cell markers (marker, decimal
// status, newline) that may straddle reads, and never splits a UTF-8
// sequence between two text chunks.
type markerScanner struct {
	marker  []byte
	pending []byte
}

func (m *markerScanner) feed(data []byte, out func(text string, end bool, rc int)) {
	m.pending = append(m.pending, data...)
	for {
		i := bytes.Index(m.pending, m.marker)
		if i < 0 {
			break
		}
		rest := m.pending[i+len(m.marker):]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			if i > 0 {
				out(string(m.pending[:i]), false, 0)
			}
			m.pending = append([]byte(nil), m.pending[i:]...)
			return
		}
		rc, _ := strconv.Atoi(string(rest[:nl]))
		if i > 0 {
			out(string(m.pending[:i]), false, 0)
		}
		out("", true, rc)
		m.pending = append([]byte(nil), rest[nl+1:]...)
	}
	cut := len(m.pending) - partialSuffix(m.pending, m.marker)
	cut = utf8Boundary(m.pending, cut)
	if cut > 0 {
		out(string(m.pending[:cut]), false, 0)
		m.pending = append([]byte(nil), m.pending[cut:]...)
	}
}

// partialSuffix is the length of the longest suffix of data that is a
// proper prefix of marker.
func partialSuffix(data, marker []byte) int {
	for n := min(len(data), len(marker)-1); n > 0; n-- {
		if bytes.HasSuffix(data, marker[:n]) {
			return n
		}
	}
	return 0
}

// utf8Boundary moves cut back so data[:cut] does not end inside a rune.
func utf8Boundary(data []byte, cut int) int {
	for j := cut - 1; j >= 0 && j >= cut-utf8.UTFMax; j-- {
		if utf8.RuneStart(data[j]) {
			if !utf8.FullRune(data[j:cut]) {
				return j
			}
			return cut
		}
	}
	return cut
}

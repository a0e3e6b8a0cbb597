package template

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// HostMirror returns the Debian mirror the host's apt uses, so the template
// is built from the same (reachable) mirror; deb.debian.org otherwise.
func HostMirror() string {
	for _, f := range []string{"/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			switch {
			case len(fields) >= 2 && fields[0] == "URIs:" && !strings.Contains(fields[1], "security"):
				return fields[1]
			case len(fields) >= 3 && fields[0] == "deb" && !strings.Contains(fields[1], "security"):
				return fields[1]
			}
		}
	}
	return "http://deb.debian.org/debian"
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// runLogged runs a long command, turning the lines pick selects (and
// rewords) into progress, so a first start that takes minutes visibly
// moves. The last lines of output explain a failure.
func runLogged(ctx context.Context, w io.Writer, start time.Time, pick func(line string) (string, bool), name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var tail bytes.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			tail.WriteString(line + "\n")
			if msg, ok := pick(line); ok {
				progress(w, "  [%3ds] %s", int(time.Since(start).Seconds()), msg)
			}
		}
		io.Copy(io.Discard, pr) // a line too long for the scanner must not block the command
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("%w: %s", err, failureLines(tail.String(), 10))
	}
	return nil
}

// debootstrapLines picks debootstrap's "I: …" lines, numbered.
func debootstrapLines() func(string) (string, bool) {
	n := 0
	return func(line string) (string, bool) {
		if !strings.HasPrefix(line, "I: ") {
			return "", false
		}
		n++
		return fmt.Sprintf("debootstrap #%d: %s", n, strings.TrimPrefix(line, "I: ")), true
	}
}

// failureLines is what a failed command's output says of its failure:
// its first few error lines (apt's tail only says "too many errors", dpkg
// named the cause earlier) and its last n lines.
func failureLines(s string, n int) string {
	var first []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(line), "error") && len(first) < 5 {
			first = append(first, line)
		}
	}
	last := lastLines(s, n)
	if len(first) == 0 || strings.Contains(last, first[0]) {
		return last
	}
	return strings.Join(first, "\n") + "\n…\n" + last
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// installAgent copies the agent binary into the rootfs when it differs from
// the one there. The copy is renamed into place so running sandboxes that
// already mapped the old binary are not disturbed.
func installAgent(src, rootfs string) (bool, error) {
	if src == "" {
		return false, fmt.Errorf("no agent binary given")
	}
	want, err := os.ReadFile(src)
	if err != nil {
		return false, fmt.Errorf("read agent binary: %w", err)
	}
	dst := filepath.Join(rootfs, AgentInRootFS)
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, want) {
		return false, nil
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, want, 0o755); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, dst)
}

package agent

import (
	"os"
	"os/exec"
	"testing"
)

// TestPoolWrapperNeedsBash: the pooled shell's script says ready only in
// bash. A bash-less image's /bin/bash runs /bin/sh, which cannot evaluate
// the rest of the script (e2e: busybox's sh answered "bad substitution"
// to every pooled command); there it says "x" and the pool is not used.
func TestPoolWrapperNeedsBash(t *testing.T) {
	for _, tt := range []struct {
		shell string
		want  byte
	}{{"/bin/bash", 'r'}, {"/bin/sh", 'x'}} { // Debian's /bin/sh is dash
		cmdR, cmdW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		readyR, readyW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(tt.shell, "-c", poolWrapper)
		cmd.ExtraFiles = []*os.File{cmdR, readyW} // fd 3: the command in, fd 4: ready out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmdR.Close()
		readyW.Close()
		b := make([]byte, 1)
		if _, err := readyR.Read(b); err != nil || b[0] != tt.want {
			t.Errorf("%s: ready byte %q (%v), want %q", tt.shell, b, err, tt.want)
		}
		cmdW.Close() // no command: the shell ends
		cmd.Process.Kill()
		cmd.Wait()
		readyR.Close()
	}
}

package client_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/syncbuf"
)

func TestExec(t *testing.T) {
	_, c := newFake(t)
	ctx := context.Background()
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Secure: true, EnvVars: map[string]string{"GLOBAL": "g"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		opts       client.ExecOptions
		wantOut    string
		wantErr    string
		wantCode   int
		connAsRoot bool
	}{
		{name: "shell", opts: client.ExecOptions{Shell: "echo hello; echoerr oops; echo bye; exit 3"}, wantOut: "hello\nbye\n", wantErr: "oops\n", wantCode: 3},
		{name: "argv", opts: client.ExecOptions{Cmd: []string{"echo", "a", "b"}}, wantOut: "a b\n"},
		{name: "not found", opts: client.ExecOptions{Cmd: []string{"nope"}}, wantErr: "fake: command not found: nope\n", wantCode: 127},
		{name: "stdin", opts: client.ExecOptions{Cmd: []string{"cat"}, Stdin: strings.NewReader("piped\n")}, wantOut: "piped\n"},
		{name: "user", opts: client.ExecOptions{Cmd: []string{"whoami"}, User: "root"}, wantOut: "root\n"},
		{name: "conn user", opts: client.ExecOptions{Cmd: []string{"whoami"}}, wantOut: "root\n", connAsRoot: true},
		{name: "default user", opts: client.ExecOptions{Cmd: []string{"whoami"}}, wantOut: "user\n"},
		{name: "cwd", opts: client.ExecOptions{Shell: "pwd", Cwd: "/tmp"}, wantOut: "/tmp\n"},
		{name: "env", opts: client.ExecOptions{Shell: "printenv A; printenv GLOBAL", Env: map[string]string{"A": "1"}}, wantOut: "1\ng\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			tt.opts.Stdout, tt.opts.Stderr = &stdout, &stderr
			conn := sb.Conn()
			if tt.connAsRoot {
				conn = conn.WithUser("root")
			}
			code, err := conn.Exec(ctx, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || stdout.String() != tt.wantOut || stderr.String() != tt.wantErr {
				t.Errorf("code %d stdout %q stderr %q; want %d %q %q", code, stdout.String(), stderr.String(), tt.wantCode, tt.wantOut, tt.wantErr)
			}
		})
	}
}

func TestExecErrors(t *testing.T) {
	srv, c := newFake(t)
	ctx := context.Background()
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		conn *client.SandboxConn
		opts client.ExecOptions
	}{
		{"no command", sb.Conn(), client.ExecOptions{}},
		{"cmd and shell", sb.Conn(), client.ExecOptions{Cmd: []string{"echo"}, Shell: "echo"}},
		{"wrong token", c.Conn(sb.SandboxID, "wrong"), client.ExecOptions{Cmd: []string{"echo"}}},
		{"unknown sandbox", c.Conn("nope", ""), client.ExecOptions{Cmd: []string{"echo"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, err := tt.conn.Exec(ctx, tt.opts); err == nil || code != -1 {
				t.Errorf("Exec = %d, %v; want error", code, err)
			}
		})
	}
	if srv.Sandbox(sb.SandboxID) == nil {
		t.Fatal("sandbox vanished")
	}
}

func TestFiles(t *testing.T) {
	_, c := newFake(t)
	ctx := context.Background()
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	conn := sb.Conn()
	for _, p := range []string{"/data/a.txt", "/data/sub/b.txt", "rel.txt"} {
		if err := conn.WriteFile(ctx, p, []byte("content of "+p)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := conn.ReadFile(ctx, "/home/user/rel.txt"); err != nil || string(got) != "content of rel.txt" {
		t.Errorf("read rel = %q, %v", got, err)
	}
	if _, err := conn.ReadFile(ctx, "/missing"); !client.IsNotFound(err) {
		t.Errorf("read missing: %v, want not found", err)
	}
	listTests := []struct {
		depth int
		want  []string
	}{
		{0, []string{"/data/a.txt:file", "/data/sub:dir"}},
		{2, []string{"/data/a.txt:file", "/data/sub:dir", "/data/sub/b.txt:file"}},
	}
	for _, tt := range listTests {
		entries, err := conn.ListDir(ctx, "/data", tt.depth)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Path+":"+e.Type)
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("ListDir depth %d = %v, want %v", tt.depth, got, tt.want)
		}
	}
	if _, err := conn.MakeDir(ctx, "/data/new"); err != nil {
		t.Fatal(err)
	}
	if e, err := conn.Stat(ctx, "/data/new"); err != nil || e.Type != client.TypeDirectory {
		t.Errorf("stat new dir = %+v, %v", e, err)
	}
	if _, err := conn.Move(ctx, "/data/a.txt", "/data/new/a.txt"); err != nil {
		t.Fatal(err)
	}
	if e, err := conn.Stat(ctx, "/data/new/a.txt"); err != nil || e.Size != int64(len("content of /data/a.txt")) {
		t.Errorf("stat moved = %+v, %v", e, err)
	}
	if err := conn.Remove(ctx, "/data/sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Stat(ctx, "/data/sub/b.txt"); !client.IsNotFound(err) {
		t.Errorf("stat removed: %v", err)
	}
	var e *client.Error
	if _, err := c.Conn("gone", "").ReadFile(ctx, "/x"); !errors.As(err, &e) || e.Status != 502 {
		t.Errorf("read on unknown sandbox: %v, want 502", err)
	}
}

func TestExecCancel(t *testing.T) {
	_, c := newFake(t)
	sb, err := c.CreateSandbox(context.Background(), client.CreateOptions{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := ioPipe()
	defer pw.Close()
	done := make(chan error, 1)
	var out syncbuf.Buffer
	go func() {
		_, err := sb.Conn().Exec(ctx, client.ExecOptions{Cmd: []string{"cat"}, Stdin: pr, Stdout: &out})
		done <- err
	}()
	if _, err := pw.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	for out.String() != "x\n" {
		waitABit()
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("cancelled Exec returned no error")
	}
}

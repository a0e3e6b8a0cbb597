package daemonproc

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain turns the test binary into a fake `forkbox serve` when
// DAEMONPROC_FAKE is set: it serves /health and the two sandbox calls
// Proc makes, with sandboxes a and b.
func TestMain(m *testing.M) {
	if mode := os.Getenv("DAEMONPROC_FAKE"); mode == "sandbox" {
		select {} // a stand-in for a runsc process its daemon left
	} else if mode != "" {
		fakeServe(mode, os.Args[2:])
		return
	}
	os.Exit(m.Run())
}

func fakeServe(mode string, args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "", "")
	dataDir := fs.String("data-dir", "", "")
	fs.String("template-dir", "", "")
	fs.String("runsc", "", "")
	fs.String("agent", "", "")
	fs.String("extra", "", "")
	fs.Parse(args)
	if mode == "exit" {
		os.Exit(3)
	}
	os.WriteFile(filepath.Join(*dataDir, "api-key"), []byte("k\n"), 0o600)
	var mu sync.Mutex
	live := map[string]bool{"a": true, "b": true}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("GET /v2/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var parts []string
		for id := range live {
			parts = append(parts, `{"sandboxID":"`+id+`"}`)
		}
		w.Write([]byte("[" + strings.Join(parts, ",") + "]"))
	})
	mux.HandleFunc("DELETE /sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != "k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		delete(live, r.PathValue("id"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	if mode == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
	}
	go http.ListenAndServe(*listen, mux)
	println("fake serving", *listen)
	select {}
}

func start(t *testing.T, mode string, o Options) *Proc {
	t.Helper()
	o.Command = []string{os.Args[0], "serve"}
	o.DataDir = t.TempDir()
	o.Env = []string{"DAEMONPROC_FAKE=" + mode}
	p, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	return p
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	p := start(t, "ok", Options{Bin: "/b", Args: []string{"--extra", "x"}})
	if p.APIKey != "k" || !strings.HasPrefix(p.URL, "http://127.0.0.1:") {
		t.Fatalf("url %q key %q", p.URL, p.APIKey)
	}
	argv := p.Cmdline()
	if want := []string{"--runsc", "/b/runsc", "--agent", "/b/forkbox-agent", "--extra", "x"}; !slices.Equal(argv[len(argv)-6:], want) {
		t.Fatalf("argv %q", argv)
	}
	ids, err := p.SandboxIDs(ctx)
	if slices.Sort(ids); err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("ids %v %v", ids, err)
	}
	if err := p.KillAll(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, err := p.SandboxIDs(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("after KillAll: %v %v", ids, err)
	}
	url := p.URL
	p.Kill9()
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if p.URL != url || !strings.Contains(p.Log(), "fake serving") {
		t.Fatalf("restart: %s log %q", p.URL, p.Log())
	}
	if err := p.Restart(ctx); err == nil {
		t.Fatal("restart of a running daemon succeeded")
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("not exited after Stop")
	}
}

func TestStopKillsStubborn(t *testing.T) {
	p := start(t, "stubborn", Options{StopTimeout: 200 * time.Millisecond})
	if err := p.Stop(context.Background()); !errors.Is(err, errKilled) {
		t.Fatalf("Stop: %v", err)
	}
}

func TestStartExit(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{Command: []string{os.Args[0], "serve"}, DataDir: dir,
		Env: []string{"DAEMONPROC_FAKE=exit"}})
	if err == nil || !strings.Contains(err.Error(), "exited during start-up") {
		t.Fatalf("Start: %v", err)
	}
}

func TestMountsIn(t *testing.T) {
	info := `22 1 0:21 / / rw - ext4 /dev/sda rw
30 22 0:4 / /tmp/d rw - tmpfs t rw
31 30 0:4 / /tmp/d/runtime/runsc/null-netns rw - nsfs nsfs rw
32 30 0:4 / /tmp/d/a\040b rw - tmpfs t rw
33 22 0:4 / /tmp/dd rw - tmpfs t rw
34 31 0:4 / /tmp/d/runtime/runsc/null-netns rw - nsfs nsfs rw`
	got := mountsIn(info, "/tmp/d/")
	want := []string{"/tmp/d/runtime/runsc/null-netns", "/tmp/d/runtime/runsc/null-netns", "/tmp/d/a b", "/tmp/d"}
	if !slices.Equal(got, want) {
		t.Fatalf("mountsIn: %q, want %q", got, want)
	}
	if got := unescape(`a\134b\011\04`); got != "a\\b\t\\04" {
		t.Fatalf("unescape: %q", got)
	}
}

// A daemon killed -9 and never restarted leaves its sandboxes running (as
// it must); Stop, the test's cleanup, then kills them and removes their
// network namespaces, which nothing else would once the data dir is gone.
func TestStopAfterKill9KillsLeftovers(t *testing.T) {
	p := start(t, "ok", Options{})
	const id = "leftover0daemonproc0"
	ns := "fbx99-" + id
	if err := exec.Command("ip", "netns", "add", ns).Run(); err != nil {
		t.Fatalf("ip netns add: %v (the test needs root)", err)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	sb := exec.Command(os.Args[0], "--root="+filepath.Join(p.DataDir, "runtime", "runsc"),
		"--bundle="+filepath.Join(p.DataDir, "sandboxes", id))
	sb.Env = append(os.Environ(), "DAEMONPROC_FAKE=sandbox")
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	gone := make(chan error, 1)
	go func() { gone <- sb.Wait() }()
	t.Cleanup(func() { sb.Process.Kill() })
	p.Kill9()
	if err := p.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after Kill9: %v", err)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the sandbox the killed daemon left still runs after Stop")
	}
	if _, err := os.Stat(filepath.Join(netnsDir, ns)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("its namespace after Stop: %v, want it removed", err)
	}
}

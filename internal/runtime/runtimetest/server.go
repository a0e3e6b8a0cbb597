package runtimetest

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/forkbox/forkbox/internal/runtime"
)

// The test server protocol every first process of the suite speaks over
// HTTP on Options.Port:
//
//	GET /count          → the number of /count requests answered so far,
//	                      this one included ("1", "2", …); the counter is
//	                      the state a checkpoint must preserve.
//	GET /probe?addr=A:P → "open" if a TCP connection from inside the
//	                      sandbox to A:P succeeds within a second, else
//	                      "closed".
//	GET /procs          → the pids visible in the sandbox's /proc, one per
//	                      line.
//	GET /write?path=P&data=D → writes D to the file P ("ok").
//	GET /read?path=P    → the content of the file P (404 if missing).
//	GET /grow?mib=N     → allocates N MiB, touches every page and keeps it
//	                      ("ok").
const pythonServer = `
import http.server, os, socket, socketserver, sys, urllib.parse
n = 0
keep = []
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        u = urllib.parse.urlparse(self.path)
        if u.path == "/count":
            n += 1
            body = str(n)
        elif u.path == "/probe":
            host, port = urllib.parse.parse_qs(u.query)["addr"][0].rsplit(":", 1)
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                body = "open"
            except OSError:
                body = "closed"
        elif u.path == "/procs":
            body = "\n".join(p for p in os.listdir("/proc") if p.isdigit())
        elif u.path == "/write":
            q = urllib.parse.parse_qs(u.query)
            with open(q["path"][0], "w") as f:
                f.write(q["data"][0])
            body = "ok"
        elif u.path == "/grow":
            keep.append(bytearray(b"\x01") * (int(urllib.parse.parse_qs(u.query)["mib"][0]) << 20))
            body = "ok"
        elif u.path == "/read":
            try:
                body = open(urllib.parse.parse_qs(u.query)["path"][0]).read()
            except OSError:
                self.send_error(404)
                return
        else:
            self.send_error(404)
            return
        b = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
S(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
`

// PythonServerArgs returns first-process args that run the test server
// protocol with the rootfs's python3 on port. The server never resolves a
// name (http.server's HTTPServer would, and hang without DNS).
func PythonServerArgs(port int) []string {
	return []string{"python3", "-c", pythonServer, strconv.Itoa(port)}
}

// Handler is an in-process implementation of the test server protocol for
// backends without real sandboxes (fake). Its probe always answers
// "closed" (nothing is reachable from a fake sandbox) and /procs answers
// "1". Clone copies the counter, which is how the fake carries state
// through a checkpoint.
type Handler struct {
	// Grow, when set, is told of each /grow (in bytes): the fake has no
	// memory for it to take.
	Grow func(n int64)

	mu    sync.Mutex
	n     int               // guarded by mu
	files map[string]string // guarded by mu; what /write wrote
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/count":
		h.mu.Lock()
		h.n++
		n := h.n
		h.mu.Unlock()
		fmt.Fprint(w, n)
	case "/probe":
		fmt.Fprint(w, "closed")
	case "/procs":
		fmt.Fprint(w, "1")
	case "/write":
		h.mu.Lock()
		if h.files == nil {
			h.files = map[string]string{}
		}
		h.files[r.URL.Query().Get("path")] = r.URL.Query().Get("data")
		h.mu.Unlock()
		fmt.Fprint(w, "ok")
	case "/grow":
		mib, _ := strconv.ParseInt(r.URL.Query().Get("mib"), 10, 64)
		if h.Grow != nil {
			h.Grow(mib << 20)
		}
		fmt.Fprint(w, "ok")
	case "/read":
		h.mu.Lock()
		data, ok := h.files[r.URL.Query().Get("path")]
		h.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, data)
	default:
		http.NotFound(w, r)
	}
}

// Clone returns a handler with a copy of h's counter and files.
func (h *Handler) Clone() http.Handler {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &Handler{n: h.n, files: maps.Clone(h.files)}
}

// CloneFiles returns a handler with a copy of h's files only: what a
// process booted afresh on the saved filesystem sees (the counter, its
// memory, starts over).
func (h *Handler) CloneFiles() http.Handler {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &Handler{files: maps.Clone(h.files)}
}

// NewID returns a random valid sandbox id.
func NewID() string { return runtime.NewID() }

// FindRepoFile walks up from the working directory to the directory holding
// go.mod and returns rel joined to it ("" if there is no go.mod), so tests
// find repo-relative prerequisites such as bin/runsc.
func FindRepoFile(rel string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(dir + "/go.mod"); err == nil {
			return dir + "/" + rel
		}
		i := strings.LastIndex(dir, "/")
		if i <= 0 {
			return ""
		}
		dir = dir[:i]
	}
}

// Files returns a copy of what /write wrote (fake.FileLister).
func (h *Handler) Files() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.files)
}

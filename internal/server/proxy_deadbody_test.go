package server

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/syncbuf"
)

// TestProxyUnreachableWithBodyNoPanic sends requests with bodies (sized
// and streamed) on keep-alive connections to a sandbox port nothing
// answers on, as clients of a dead sandbox do: each is a 502, and the
// server logs no recovered panic ("invalid concurrent Body.Read call",
// golang/go#68560: a full-duplex handler that leaves the body unread).
func TestProxyUnreachableWithBodyNoPanic(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	var errLog syncbuf.Buffer
	srv := httptest.NewUnstartedServer(e.s.Handler())
	srv.Config.ErrorLog = log.New(&errLog, "", 0)
	srv.Start()
	defer srv.Close()
	client := srv.Client()
	for i := range 20 {
		var body io.Reader = strings.NewReader(strings.Repeat("x", 64<<10))
		if i%2 == 1 {
			pr, pw := io.Pipe()
			go func() { pw.Write(bytes.Repeat([]byte("y"), 64<<10)); pw.Close() }()
			body = pr // no length: chunked
		}
		req, err := http.NewRequest("POST", srv.URL+"/files?path=/tmp/x", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", "3000")
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("request %d: %v", i, err)
			continue
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, data)
		}
	}
	srv.Close() // waits for the connections' goroutines
	if strings.Contains(errLog.String(), "panic") {
		t.Fatalf("server logged a panic:\n%s", errLog.String())
	}
}

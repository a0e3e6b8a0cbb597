package server

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// bigBody is what the test sandbox's download server serves.
var bigBody = bytes.Repeat([]byte("forkbox-"), 3<<17) // 3 MiB

// downloads is a server in a test sandbox: a large file with a length and
// an event stream without one.
func downloads() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(bigBody)))
		w.Header().Set("X-From", "sandbox")
		w.Write(bigBody)
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 2; i++ {
			io.WriteString(w, "tick\n")
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond)
		}
	})
	return mux
}

// GETs to ordinary ports take serveGet's path: bodies arrive whole with
// their length and headers, streams without a length arrive as produced,
// and the client's connection stays usable for the next request.
func TestPortGets(t *testing.T) {
	e := newEnv(t)
	id := e.create(map[string]any{"templateID": "base"})["sandboxID"].(string)
	host := "8081-" + id + ".sbx.test"
	for i := 0; i < 2; i++ { // twice: a reused client connection still works
		resp, data := e.plane("GET", "/big", "", "Host", host)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(data, bigBody) {
			t.Fatalf("GET /big: %s, %d bytes (want %d)", resp.Status, len(data), len(bigBody))
		}
		if resp.ContentLength != int64(len(bigBody)) || resp.Header.Get("X-From") != "sandbox" {
			t.Errorf("GET /big headers: length %d, %v", resp.ContentLength, resp.Header)
		}
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/events", nil)
	req.Host = host
	start := time.Now()
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, line); err != nil || string(line) != "tick\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	if waited := time.Since(start); waited > 250*time.Millisecond {
		t.Errorf("first event took %s: the stream was buffered", waited)
	}
}

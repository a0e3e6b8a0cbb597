package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

// TestSpliceBodyTCP sends bodies of several sizes around the low-water
// mark through spliceBody over real TCP sockets, from an upstream that
// writes in small bursts and keeps its connection open after the body
// (ignoring Connection: close): every byte must arrive, promptly — the
// tail must not wait for bytes that never come.
func TestSpliceBodyTCP(t *testing.T) {
	for _, n := range []int{1, spliceLowat, 2*spliceLowat + 1, 3*spliceLowat + 12345} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			body := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
			up := burstyUpstream(t, body)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, err := net.Dial("tcp", up)
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				defer context.AfterFunc(r.Context(), func() { conn.Close() })()
				resp, br, err := sendGet(r, conn)
				if err != nil {
					t.Error(err)
					return
				}
				w.Header().Set("Content-Length", itoa(resp.ContentLength))
				spliceBody(w, br, conn, resp.ContentLength)
			}))
			defer srv.Close()
			start := time.Now()
			client := srv.Client()
			client.Timeout = 10 * time.Second
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("got %d bytes (%v), want %d", len(got), err, n)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %s: the tail waited", took)
			}
		})
	}
}

// burstyUpstream serves one response with body in 16 KiB bursts and then
// holds the connection open until the test ends.
func burstyUpstream(t *testing.T, body []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		http.ReadRequest(bufio.NewReader(c))
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body))
		for len(body) > 0 {
			k := min(16<<10, len(body))
			if _, err := c.Write(body[:k]); err != nil {
				return
			}
			body = body[k:]
			time.Sleep(time.Millisecond)
		}
		<-done
	}()
	return ln.Addr().String()
}

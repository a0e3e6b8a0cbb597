package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/forkbox/forkbox/internal/sandbox"
)

// plane sends a data-plane request: no API key; hdr are name/value pairs
// ("Host" sets the request's host).
func (e *env) plane(method, path string, body string, hdr ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func decodeEcho(t *testing.T, resp *http.Response, data []byte) echoed {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var got echoed
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return got
}

func TestProxyRouting(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	for _, tc := range []struct {
		name     string
		hdr      []string
		wantPort string // which server answered: envd echoes via "/", others too
	}{
		{"headers envd", []string{"E2b-Sandbox-Id", id, "E2b-Sandbox-Port", "49983"}, "envd"},
		{"headers default port", []string{"E2b-Sandbox-Id", id}, "envd"},
		{"headers code interpreter", []string{"E2b-Sandbox-Id", id, "E2b-Sandbox-Port", "49999"}, "49999"},
		{"host envd", []string{"Host", "49983-" + id + ".sbx.test"}, "envd"},
		{"host with port", []string{"Host", "8080-" + id + ".sbx.test:3000"}, "8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := append(tc.hdr, "X-Access-Token", "tok", "Authorization", "Basic dXNlcjo=",
				"Connect-Protocol-Version", "1", "Keepalive-Ping-Interval", "30")
			resp, data := e.plane("POST", "/some/path?x=1", "payload", hdr...)
			got := decodeEcho(t, resp, data)
			if got.Path != "/some/path" || got.Query != "x=1" || got.Body != "payload" || got.Method != "POST" {
				t.Errorf("echo: %+v", got)
			}
			for _, h := range []string{"X-Access-Token", "Authorization", "Connect-Protocol-Version", "Keepalive-Ping-Interval"} {
				if got.Header.Get(h) == "" {
					t.Errorf("header %s was not forwarded: %v", h, got.Header)
				}
			}
			for _, h := range []string{"E2b-Sandbox-Id", "E2b-Sandbox-Port", "X-Api-Key"} {
				if got.Header.Get(h) != "" {
					t.Errorf("header %s leaked to the sandbox", h)
				}
			}
		})
	}
}

func TestProxyBlocksInit(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	e.mu.Lock()
	delete(e.inits, id)
	e.mu.Unlock()
	for _, p := range []string{"/init", "/init/", "//init", "/x/../init", "/%69nit", "/INIT", "/a%2F..%2Finit"} {
		for _, hdr := range [][]string{
			{"E2b-Sandbox-Id", id, "E2b-Sandbox-Port", "49983"},
			{"E2b-Sandbox-Id", id},
			{"Host", "49983-" + id + ".sbx.test"},
		} {
			req, _ := http.NewRequest("POST", e.srv.URL, strings.NewReader(`{"accessToken":"evil"}`))
			req.URL.Opaque = p // send the path exactly as written
			for i := 0; i < len(hdr); i += 2 {
				if hdr[i] == "Host" {
					req.Host = hdr[i+1]
				} else {
					req.Header.Set(hdr[i], hdr[i+1])
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// "//init" is an authority-form request target: Go reads it as
			// host "init" and path "/", so it never names /init.
			if p != "//init" && resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %v: %d %s", p, hdr, resp.StatusCode, data)
			}
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, reached := e.inits[id]; reached {
		t.Fatal("/init reached the agent through the proxy")
	}
}

func TestProxyErrors(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	killed := e.create(nil)["sandboxID"].(string)
	if resp, _ := e.call("DELETE", "/sandboxes/"+killed, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatal("kill failed")
	}
	for _, gone := range []string{"nosuchsandbox", killed} {
		for _, hdr := range [][]string{{"E2b-Sandbox-Id", gone}, {"Host", "49983-" + gone + ".sbx.test"}} {
			resp, data := e.plane("GET", "/health", "", hdr...)
			if resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("%v: %d %s", hdr, resp.StatusCode, data)
			}
			var body map[string]any
			json.Unmarshal(data, &body)
			if body["message"] != "The sandbox was not found" || body["sandboxId"] != gone || body["code"] != 502.0 || len(body) != 3 {
				t.Errorf("gone body: %s", data)
			}
		}
	}
	resp, data := e.plane("GET", "/", "", "E2b-Sandbox-Id", id, "E2b-Sandbox-Port", "3000")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(data), `"port":3000`) {
		t.Errorf("closed port: %d %s", resp.StatusCode, data)
	}
	resp, data = e.plane("GET", "/", "", "E2b-Sandbox-Id", id, "E2b-Sandbox-Port", "abc")
	wantError(t, resp, data, http.StatusBadRequest)
}

func TestProxyNotRunning(t *testing.T) {
	e := newEnv(t)
	e.initGate = make(chan struct{})
	created := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", e.srv.URL+"/sandboxes", strings.NewReader(`{"templateID":"base"}`))
		req.Header.Set("X-API-Key", testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			created <- 0
			return
		}
		resp.Body.Close()
		created <- resp.StatusCode
	}()
	var id string
	for deadline := time.Now().Add(3 * time.Second); id == ""; {
		sbs, _, _ := e.mgr.List(context.Background(), sandbox.ListFilter{})
		if len(sbs) == 1 {
			id = sbs[0].ID
		} else if time.Now().After(deadline) {
			t.Fatal("sandbox never appeared")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, data := e.plane("GET", "/health", "", "E2b-Sandbox-Id", id)
	wantError(t, resp, data, http.StatusConflict)
	resp, data = e.call("POST", "/sandboxes/"+id+"/connect", `{"timeout":10}`)
	wantError(t, resp, data, http.StatusConflict)
	close(e.initGate)
	if code := <-created; code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	if resp, data = e.plane("GET", "/health", "", "E2b-Sandbox-Id", id); resp.StatusCode != http.StatusNoContent {
		t.Errorf("after create: %d %s", resp.StatusCode, data)
	}
}

func TestProxyStreamsUnbuffered(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	for _, tc := range []struct {
		name   string
		client *http.Client
	}{
		{"http1", e.srv.Client()},
		{"h2c", h2cClient()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", e.srv.URL+"/stream", nil)
			req.Header.Set("E2b-Sandbox-Id", id)
			resp, err := tc.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if tc.name == "h2c" && resp.ProtoMajor != 2 {
				t.Errorf("proto %s, want HTTP/2", resp.Proto)
			}
			r := bufio.NewReader(resp.Body)
			if got := readLine(t, r); got != "first\n" {
				t.Fatalf("first chunk %q", got)
			}
			e.release <- struct{}{}
			if got := readLine(t, r); got != "second\n" {
				t.Fatalf("second chunk %q", got)
			}
		})
	}
}

// h2cClient speaks cleartext HTTP/2 with prior knowledge, like the Go SDK.
func h2cClient() *http.Client {
	return &http.Client{Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

func TestH2CControlAPI(t *testing.T) {
	e := newEnv(t)
	resp, err := h2cClient().Get(e.srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("health over h2c: %d %s", resp.StatusCode, resp.Proto)
	}
}

func TestProxyUpgrade(t *testing.T) {
	e := newEnv(t)
	id := e.create(nil)["sandboxID"].(string)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: 49983-"+id+".sbx.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	for _, line := range []string{"hello\n", "again\n"} {
		io.WriteString(conn, line)
		if got := readLine(t, r); got != strings.ToUpper(line) {
			t.Fatalf("echo %q, want %q", got, strings.ToUpper(line))
		}
	}
}

func TestTrafficToken(t *testing.T) {
	e := newEnv(t)
	private := e.create(map[string]any{"templateID": "base", "network": map[string]any{"allowPublicTraffic": false}})
	public := e.create(map[string]any{"templateID": "base", "secure": true})
	tok, _ := private["trafficAccessToken"].(string)
	if tok == "" || public["trafficAccessToken"] != nil {
		t.Fatalf("tokens: private %v, public %v", private["trafficAccessToken"], public["trafficAccessToken"])
	}
	pid, qid := private["sandboxID"].(string), public["sandboxID"].(string)
	for _, tc := range []struct {
		name string
		hdr  []string
		want int
	}{
		{"no token", []string{"Host", "8080-" + pid + ".sbx.test"}, http.StatusForbidden},
		{"wrong token", []string{"Host", "8080-" + pid + ".sbx.test", "e2b-traffic-access-token", "nope"}, http.StatusForbidden},
		{"token", []string{"Host", "8080-" + pid + ".sbx.test", "e2b-traffic-access-token", tok}, http.StatusOK},
		{"envd needs none", []string{"E2b-Sandbox-Id", pid}, http.StatusOK},
		// The code interpreter follows the rules of any port (the SDK sends
		// the traffic token on every call to it)...
		{"code interpreter without token", []string{"E2b-Sandbox-Id", pid, "E2b-Sandbox-Port", "49999"}, http.StatusForbidden},
		{"code interpreter with token", []string{"E2b-Sandbox-Id", pid, "E2b-Sandbox-Port", "49999", "e2b-traffic-access-token", tok}, http.StatusOK},
		{"public secure", []string{"Host", "8080-" + qid + ".sbx.test"}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := e.plane("GET", "/echo", "", tc.hdr...)
			if tc.want != http.StatusOK {
				wantError(t, resp, data, tc.want)
				return
			}
			if got := decodeEcho(t, resp, data); got.Header.Get("E2b-Traffic-Access-Token") != "" {
				t.Error("traffic token leaked to the sandbox")
			}
		})
	}
}

// ...and its /execute also needs the envd access token of a secure
// sandbox, which the SDK sends there.
func TestCodeInterpreterExecuteNeedsAccessToken(t *testing.T) {
	e := newEnv(t)
	sb := e.create(map[string]any{"templateID": "base", "secure": true})
	id, tok := sb["sandboxID"].(string), sb["envdAccessToken"].(string)
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/execute", "", http.StatusUnauthorized},
		{"/execute", "wrong", http.StatusUnauthorized},
		{"/execute", tok, http.StatusOK},
		{"/contexts", "", http.StatusOK},
	} {
		hdr := []string{"E2b-Sandbox-Id", id, "E2b-Sandbox-Port", "49999"}
		if tc.token != "" {
			hdr = append(hdr, "X-Access-Token", tc.token)
		}
		resp, data := e.plane("GET", tc.path, "", hdr...)
		if resp.StatusCode != tc.want {
			t.Errorf("%s with token %q: %d %s, want %d", tc.path, tc.token, resp.StatusCode, data, tc.want)
		}
	}
}

func TestTrafficTokenForSecure(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TrafficTokenForSecure = true })
	sb := e.create(map[string]any{"templateID": "base", "secure": true})
	id, tok := sb["sandboxID"].(string), sb["trafficAccessToken"].(string)
	resp, data := e.plane("GET", "/", "", "E2b-Sandbox-Id", id, "E2b-Sandbox-Port", "8080")
	wantError(t, resp, data, http.StatusForbidden)
	resp, data = e.plane("GET", "/", "", "E2b-Sandbox-Id", id, "E2b-Sandbox-Port", "8080", "E2b-Traffic-Access-Token", tok)
	decodeEcho(t, resp, data)
}

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

func newFake(t *testing.T) (*clienttest.Server, *client.Client) {
	t.Helper()
	srv := clienttest.NewServer(t)
	return srv, client.New(srv.URL+"/", clienttest.APIKey)
}

// body decodes the JSON body of a recorded request.
func body(t *testing.T, r clienttest.Request) map[string]any {
	t.Helper()
	m := map[string]any{}
	if len(r.Body) > 0 {
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("request body %q: %v", r.Body, err)
		}
	}
	return m
}

func TestCreateSandbox(t *testing.T) {
	srv, c := newFake(t)
	ctx := context.Background()
	no := false
	sb, err := c.CreateSandbox(ctx, client.CreateOptions{
		TemplateID: "base", Timeout: 1500 * time.Millisecond, Metadata: map[string]string{"a": "1"},
		EnvVars: map[string]string{"X": "y"}, AutoPause: true, AutoResume: true, Secure: true,
		AllowInternet: &no, CPUCount: 2, MemoryMB: 1024,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sb.SandboxID == "" || sb.TemplateID != "base" || sb.EnvdVersion != clienttest.EnvdVersion || sb.EnvdAccessToken == "" || sb.Domain != "" {
		t.Errorf("sandbox = %+v", sb)
	}
	req := srv.LastRequest()
	if req.Method != http.MethodPost || req.Path != "/sandboxes" || req.Header.Get("X-API-Key") != clienttest.APIKey {
		t.Errorf("request = %s %s key %q", req.Method, req.Path, req.Header.Get("X-API-Key"))
	}
	got := body(t, req)
	want := map[string]any{
		"templateID": "base", "timeout": 2.0, "autoPause": true, "autoResume": map[string]any{"enabled": true},
		"secure": true, "allow_internet_access": false, "metadata": map[string]any{"a": "1"},
		"envVars": map[string]any{"X": "y"}, "cpuCount": 2.0, "memoryMB": 1024.0,
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("body = %s, want %s", g, w)
	}
	if _, err := c.CreateSandbox(ctx, client.CreateOptions{}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("create without template: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSandboxCalls(t *testing.T) {
	srv, c := newFake(t)
	ctx := context.Background()
	id := srv.AddSandbox(client.SandboxInfo{TemplateID: "base", Metadata: map[string]string{"k": "v"}})
	tests := []struct {
		name     string
		call     func() error
		method   string
		path     string
		wantBody string
	}{
		{"timeout", func() error { return c.SetTimeout(ctx, id, time.Minute) }, "POST", "/sandboxes/" + id + "/timeout", `{"timeout":60}`},
		{"refresh", func() error { return c.Refresh(ctx, id, 2*time.Minute) }, "POST", "/sandboxes/" + id + "/refreshes", `{"duration":120}`},
		{"pause", func() error { return c.Pause(ctx, id) }, "POST", "/sandboxes/" + id + "/pause", `{}`},
		{"connect", func() error {
			sb, err := c.Connect(ctx, id, 30*time.Second)
			if err == nil && sb.SandboxID != id {
				err = errors.New("wrong id " + sb.SandboxID)
			}
			return err
		}, "POST", "/sandboxes/" + id + "/connect", `{"timeout":30}`},
		{"get", func() error {
			info, err := c.GetSandbox(ctx, id)
			if err == nil && (info.State != "running" || info.Metadata["k"] != "v" || info.StartedAt.IsZero()) {
				err = errors.New("bad info")
			}
			return err
		}, "GET", "/sandboxes/" + id, ""},
		{"metrics", func() error {
			m, err := c.Metrics(ctx, id)
			if err == nil && (len(m) != 1 || m[0].CPUCount == 0 || m[0].MemTotal == 0) {
				err = errors.New("bad metrics")
			}
			return err
		}, "GET", "/sandboxes/" + id + "/metrics", ""},
		{"kill", func() error { return c.KillSandbox(ctx, id) }, "DELETE", "/sandboxes/" + id, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
			r := srv.LastRequest()
			if r.Method != tt.method || r.Path != tt.path || string(r.Body) != tt.wantBody && tt.wantBody != "" {
				t.Errorf("got %s %s %s, want %s %s %s", r.Method, r.Path, r.Body, tt.method, tt.path, tt.wantBody)
			}
		})
	}
	if err := c.KillSandbox(ctx, id); !client.IsNotFound(err) {
		t.Errorf("second kill: %v, want not found", err)
	}
}

func TestListSandboxesPaging(t *testing.T) {
	srv, c := newFake(t)
	ctx := context.Background()
	for i := range 5 {
		md := map[string]string{"team": "a"}
		if i == 4 {
			md["team"] = "b"
		}
		srv.AddSandbox(client.SandboxInfo{Metadata: md})
	}
	var all []client.SandboxInfo
	var pages int
	var lastToken string // the token the daemon handed out last
	opts := client.ListOptions{State: []string{"running", "paused"}, Metadata: map[string]string{"team": "a"}, Limit: 3}
	for {
		list, next, err := c.ListSandboxes(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		all = append(all, list...)
		if next == "" {
			break
		}
		opts.NextToken, lastToken = next, next
	}
	if len(all) != 4 || pages != 2 {
		t.Errorf("got %d sandboxes in %d pages, want 4 in 2", len(all), pages)
	}
	q, _ := url.ParseQuery(srv.LastRequest().Query)
	if q.Get("metadata") != "team=a" || q.Get("state") != "running,paused" || q.Get("limit") != "3" || lastToken == "" || q.Get("nextToken") != lastToken {
		t.Errorf("query = %v", q)
	}
}

func TestErrorDecoding(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		is      error
		wantMsg string
	}{
		{"json 404", 404, `{"code":404,"message":"sandbox x not found"}`, client.ErrNotFound, "sandbox x not found"},
		{"json 409", 409, `{"code":409,"message":"already paused"}`, client.ErrConflict, "already paused"},
		{"json 401", 401, `{"code":401,"message":"bad key"}`, client.ErrUnauthorized, "bad key"},
		{"plain 429", 429, "slow down", client.ErrTooManyRequests, "slow down"},
		{"empty 400", 400, "", client.ErrBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer hs.Close()
			_, err := client.New(hs.URL, "k").GetSandbox(context.Background(), "x")
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not *client.Error", err)
			}
			if e.Status != tt.status || e.Code != tt.status || e.Message != tt.wantMsg || !errors.Is(err, tt.is) {
				t.Errorf("error = %+v (is %v: %v)", e, tt.is, errors.Is(err, tt.is))
			}
			if tt.is != client.ErrNotFound && client.IsNotFound(err) {
				t.Error("IsNotFound true for", tt.status)
			}
		})
	}
}

func TestMissingAPIKey(t *testing.T) {
	srv := clienttest.NewServer(t)
	_, _, err := client.New(srv.URL, "").ListSandboxes(context.Background(), client.ListOptions{})
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("err = %v, want unauthorized", err)
	}
}

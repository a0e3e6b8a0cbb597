package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// TemplateStep is one build step: RUN [cmd, user?], COPY [src, dest, user,
// mode] (FilesHash names its uploaded files), ENV [k1, v1, …], WORKDIR
// [dir], USER [user]. Force rebuilds it and every step after it.
type TemplateStep struct {
	Type      string   `json:"type"`
	Args      []string `json:"args"`
	FilesHash string   `json:"filesHash,omitempty"`
	Force     bool     `json:"force,omitempty"`
}

// TemplateRegistry is the credentials of the image's registry.
type TemplateRegistry struct {
	Type     string `json:"type"` // "registry"
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// TemplateBuildSpec is what a build makes: a base (FromImage or
// FromTemplate; neither means forkbox's base template), steps, and an
// optional start command with its ready check.
type TemplateBuildSpec struct {
	FromImage         string            `json:"fromImage,omitempty"`
	FromTemplate      string            `json:"fromTemplate,omitempty"`
	FromImageRegistry *TemplateRegistry `json:"fromImageRegistry,omitempty"`
	Steps             []TemplateStep    `json:"steps"`
	StartCmd          string            `json:"startCmd,omitempty"`
	ReadyCmd          string            `json:"readyCmd,omitempty"`
	Force             bool              `json:"force,omitempty"`
}

// TemplateBuildTicket names a requested build.
type TemplateBuildTicket struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Names      []string `json:"names"`
	Tags       []string `json:"tags"`
}

// RequestTemplateBuild registers a build of the template name ("name" or
// "name:tag"; created when new) (POST /v3/templates).
func (c *Client) RequestTemplateBuild(ctx context.Context, name string, tags []string, cpuCount, memoryMB int) (*TemplateBuildTicket, error) {
	in := map[string]any{"name": name, "tags": tags, "cpuCount": cpuCount, "memoryMB": memoryMB}
	var out TemplateBuildTicket
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v3/templates", in: in, out: &out})
	return &out, err
}

// UploadTemplateFiles uploads a COPY step's files (a tar, gzip'd or not)
// under filesHash unless the daemon has them already; it reports whether an
// upload happened.
func (c *Client) UploadTemplateFiles(ctx context.Context, templateID, filesHash string, tar io.Reader, size int64) (bool, error) {
	var link struct {
		Present bool              `json:"present"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/templates/" + pathID(templateID) + "/files/" + pathID(filesHash), out: &link}); err != nil {
		return false, err
	}
	if link.Present {
		return false, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, link.URL, tar)
	if err != nil {
		return false, err
	}
	req.ContentLength = size
	for k, v := range link.Headers {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("upload files %s: %w", filesHash, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return false, fmt.Errorf("upload files %s: %w", filesHash, decodeError(resp))
	}
	return true, nil
}

// StartTemplateBuild starts a requested build (POST
// /v2/templates/{id}/builds/{buildID}); follow it with TemplateBuildStatus.
func (c *Client) StartTemplateBuild(ctx context.Context, templateID, buildID string, spec TemplateBuildSpec) error {
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v2/templates/" + pathID(templateID) + "/builds/" + pathID(buildID), in: spec})
	return err
}

// TemplateLogEntry is one build log line; Step is "base", "1"… or "finalize".
type TemplateLogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Message   string    `json:"message"`
	Level     string    `json:"level"`
	Step      string    `json:"step,omitempty"`
}

// TemplateBuildStatus is a build's state and a page of its log.
type TemplateBuildStatus struct {
	TemplateID string             `json:"templateID"`
	BuildID    string             `json:"buildID"`
	Status     string             `json:"status"` // waiting, building, ready, error
	LogEntries []TemplateLogEntry `json:"logEntries"`
	Reason     *struct {
		Message string `json:"message"`
		Step    string `json:"step,omitempty"`
	} `json:"reason,omitempty"`
}

// GetTemplateBuildStatus returns a build's status and its log entries from
// logsOffset (at most 100).
func (c *Client) GetTemplateBuildStatus(ctx context.Context, templateID, buildID string, logsOffset int) (*TemplateBuildStatus, error) {
	var out TemplateBuildStatus
	q := url.Values{"logsOffset": {strconv.Itoa(logsOffset)}}
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/templates/" + pathID(templateID) + "/builds/" + pathID(buildID) + "/status", query: q, out: &out})
	return &out, err
}

// Template is one template as GET /templates lists it.
type Template struct {
	TemplateID  string    `json:"templateID"`
	BuildID     string    `json:"buildID"`
	BuildStatus string    `json:"buildStatus"`
	BuildCount  int       `json:"buildCount"`
	Names       []string  `json:"names"`
	Aliases     []string  `json:"aliases"`
	CPUCount    int       `json:"cpuCount"`
	MemoryMB    int       `json:"memoryMB"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// ListTemplates lists the built-in and user-built templates (GET /templates).
func (c *Client) ListTemplates(ctx context.Context) ([]Template, error) {
	var out []Template
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/templates", out: &out})
	return out, err
}

// DeleteTemplate deletes a user-built template (or a snapshot) by id or
// name; sandboxes running from it keep running (DELETE /templates/{id}).
func (c *Client) DeleteTemplate(ctx context.Context, idOrName string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/templates/" + pathID(idOrName)})
	return err
}

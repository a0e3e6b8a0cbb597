package client

import (
	"context"
	"net/http"
	"time"
)

// TemplateTag is one tag of a template and the build it names.
type TemplateTag struct {
	Tag       string    `json:"tag"`
	BuildID   string    `json:"buildID"`
	CreatedAt time.Time `json:"createdAt"`
}

// AssignedTemplateTags is the answer to AssignTemplateTags.
type AssignedTemplateTags struct {
	Tags    []string `json:"tags"`
	BuildID string   `json:"buildID"`
}

// AssignTemplateTags makes tags name the build target names ("name:tag",
// or a bare name for its latest ready build) (POST /templates/tags).
func (c *Client) AssignTemplateTags(ctx context.Context, target string, tags []string) (*AssignedTemplateTags, error) {
	var out AssignedTemplateTags
	in := map[string]any{"target": target, "tags": tags}
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/templates/tags", in: in, out: &out})
	return &out, err
}

// RemoveTemplateTags deletes tags of the template name (DELETE
// /templates/tags); a tag it does not have is a NotFound error.
func (c *Client) RemoveTemplateTags(ctx context.Context, name string, tags []string) error {
	in := map[string]any{"name": name, "tags": tags}
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/templates/tags", in: in})
	return err
}

// ListTemplateTags lists a template's tags (GET /templates/{id}/tags).
func (c *Client) ListTemplateTags(ctx context.Context, idOrName string) ([]TemplateTag, error) {
	var out []TemplateTag
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/templates/" + pathID(idOrName) + "/tags", out: &out})
	return out, err
}

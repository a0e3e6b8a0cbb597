package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/client/clienttest"
)

func TestTemplateTagVerbs(t *testing.T) {
	srv := clienttest.NewServer(t)
	c := client.New(srv.URL, clienttest.APIKey)
	if _, err := c.RequestTemplateBuild(context.Background(), "app:v1", nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if tags := mustJSON[[]client.TemplateTag](t, srv, "template", "tags", "app"); len(tags) != 0 {
		t.Errorf("tags of a template with no ready build: %+v", tags)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"template", "tag", "app:v1", "prod"}, "no ready build"},
		{[]string{"template", "untag", "app", "v9"}, "v9"},
		{[]string{"template", "tags", "nope"}, "nope"},
	} {
		r := runCLI(t, srv, nil, tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want a failure saying %q", tc.args, r.code, r.stderr, tc.says)
		}
	}
}

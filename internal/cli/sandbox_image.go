package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// imageTemplate returns the template of an image for `sandbox create
// --image`: a template named after the image, built from it with no steps
// (a rebuild is a cache hit, so the image is pulled and unpacked once).
func (a *app) imageTemplate(cmd *cobra.Command, ref string) (string, error) {
	name := "image-" + strings.NewReplacer("/", "-", ":", "-", "@", "-").Replace(ref)
	if len(name) > 128 {
		name = name[:128]
	}
	o := &remoteBuildOpts{image: ref}
	spec, err := o.spec()
	if err != nil {
		return "", err
	}
	c := a.client()
	t, err := c.RequestTemplateBuild(cmd.Context(), name, nil, 0, 0)
	if err != nil {
		return "", err
	}
	if err := c.StartTemplateBuild(cmd.Context(), t.TemplateID, t.BuildID, *spec); err != nil {
		return "", err
	}
	quiet := *a
	quiet.json = true // the build's log is not the command's output
	st, err := quiet.followBuild(cmd.Context(), c, t)
	if err != nil {
		return "", err
	}
	if st.Status != "ready" {
		msg := "unknown error"
		if st.Reason != nil {
			msg = st.Reason.Message
		}
		return "", fmt.Errorf("image %s: %s", ref, msg)
	}
	return t.TemplateID, nil
}

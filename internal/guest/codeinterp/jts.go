package codeinterp

import (
	"fmt"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// typescriptSpec runs TypeScript in its own ijavascript kernel, as E2B
// does: each cell is transpiled to JavaScript first, here with esbuild's
// transform (types erased, imports turned into require, top-level
// declarations kept so they persist across cells).
var typescriptSpec = func() *kernelSpec {
	spec := *javascriptSpec
	spec.name = langTypeScript
	spec.transform = transpileTypeScript
	return &spec
}()

// transpileTypeScript turns one TypeScript cell into JavaScript.
func transpileTypeScript(code string) (string, error) {
	r := api.Transform(code, api.TransformOptions{
		Loader: api.LoaderTS, Format: api.FormatCommonJS, Target: api.ES2022, Sourcefile: "cell.ts",
	})
	if len(r.Errors) > 0 {
		var msgs []string
		for _, m := range r.Errors {
			if m.Location != nil {
				msgs = append(msgs, fmt.Sprintf("%d:%d: %s", m.Location.Line, m.Location.Column+1, m.Text))
			} else {
				msgs = append(msgs, m.Text)
			}
		}
		return "", &execError{"SyntaxError", strings.Join(msgs, "; ")}
	}
	return string(r.Code), nil
}

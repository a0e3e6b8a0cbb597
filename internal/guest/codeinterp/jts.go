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

// transpileTypeScript turns one TypeScript cell into JavaScript; a cell
// with top-level await is transpiled as a module (CommonJS has no
// top-level await) and then wrapped like a JavaScript one.
func transpileTypeScript(code string) (string, error) {
	format := api.FormatCommonJS
	wrap := needsAwaitWrap(code, api.LoaderTS)
	if wrap {
		format = api.FormatESModule
	}
	r := api.Transform(code, api.TransformOptions{
		Loader: api.LoaderTS, Format: format, Target: api.ES2022, Sourcefile: "cell.ts",
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
	if wrap {
		return wrapTopLevelAwait(string(r.Code)), nil
	}
	return string(r.Code), nil
}

package codeinterp

import (
	"path"
	"sort"
	"strings"
)

// KernelSpecs returns a Jupyter kernelspec for the kernel of every
// language, named forkbox-<language>, with the command line, environment
// and helper files the server starts that kernel with, so Jupyter's own
// tools (the protocol conformance suite) can start the same kernels. The
// result maps paths relative to a JUPYTER_PATH entry to file contents; dir
// is where that entry will be, on the machine the kernels run on (a
// sandbox, say), since the command lines name the helpers by path. The
// TypeScript kernel is ijavascript's: cells reach it as JavaScript, after
// TranspileTypeScript.
func KernelSpecs(cfg Config, dir string) (map[string][]byte, error) {
	s := New(cfg)
	files := map[string][]byte{}
	langs := make([]string, 0, len(kernelSpecs))
	for lang := range kernelSpecs {
		langs = append(langs, lang)
	}
	sort.Strings(langs)
	for _, lang := range langs {
		spec := kernelSpecs[lang]
		rel := path.Join("kernels", "forkbox-"+lang)
		placeholder := path.Join(dir, rel, "connection.json")
		argv, err := spec.argv(s, placeholder)
		if err != nil {
			return nil, err
		}
		for i, a := range argv {
			argv[i] = strings.ReplaceAll(a, placeholder, "{connection_file}")
		}
		vars := spec.env
		if spec.argvEnv != nil {
			vars = append(append([]string(nil), vars...), spec.argvEnv(s)...)
		}
		env := map[string]string{}
		for _, kv := range vars {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		files[path.Join(rel, "kernel.json")] = mustJSON(map[string]any{
			"argv": argv, "display_name": "forkbox " + lang, "language": lang, "env": env,
			"interrupt_mode": "signal",
		})
		for name, src := range spec.helpers {
			files[path.Join(rel, name)] = src
		}
	}
	return files, nil
}

// TranspileTypeScript is what the server does to a TypeScript cell before
// the TypeScript kernel (ijavascript) sees it: esbuild's transform, and
// the rewrite of a top-level await. A syntax error is returned as an
// error naming where it is.
func TranspileTypeScript(code string) (string, error) {
	return transpileTypeScript(code)
}

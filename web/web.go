// Package web is forkbox's dashboard: a dependency-free single-page app
// (plain HTML, CSS and JavaScript, no build step) that talks to the
// control API of the daemon serving it, with the user's API key.
//
// The daemon mounts it under Path with the prefix stripped:
//
//	mux.Handle(web.Path, http.StripPrefix(strings.TrimSuffix(web.Path, "/"), web.Handler()))
//
// The page finds the API at the root of the origin that served it (the
// part of its own URL before Path's last element).
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Path is where the daemon serves the dashboard.
const Path = "/dashboard/"

//go:embed static
var files embed.FS

// contentTypes maps the extensions of the embedded files to their types.
// They are fixed here rather than taken from the host's MIME tables, which
// differ between systems (.js is application/javascript on some).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".json": "application/json",
	".txt":  "text/plain; charset=utf-8",
}

// csp confines the page to its own origin: its own scripts and styles
// (no inline code) and API calls to the daemon that served it.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	data  []byte
	ctype string
	etag  string
}

// Handler serves the dashboard's files: index.html at "/" (or ""), the
// other files by name, 404 for anything else. It does not depend on the
// prefix it is mounted under.
func Handler() http.Handler {
	root, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	assets := map[string]*asset{}
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			ct = http.DetectContentType(data)
		}
		sum := sha256.Sum256(data)
		assets["/"+p] = &asset{data: data, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := path.Clean("/" + strings.TrimPrefix(r.URL.Path, "/"))
		if p == "/" {
			p = "/index.html"
		}
		a, ok := assets[p]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if a.ctype == contentTypes[".html"] {
			h.Set("Content-Security-Policy", csp)
		}
		http.ServeContent(w, r, p, time.Time{}, bytes.NewReader(a.data))
	})
}

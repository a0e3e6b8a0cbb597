package fake

import (
	"archive/tar"
	"io"
	"path"
	"sort"
	"strings"
)

// writeFilesTar writes files (absolute path → content; a path ending in
// "/" is a directory) as an upper-layer tar: "./", then each directory
// and file under "./".
func writeFilesTar(w io.Writer, files map[string]string) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	var names []string
	for p := range files {
		if strings.HasSuffix(p, "/") { // a directory (clienttest's agent)
			dirs[path.Clean("/"+p)] = true
			continue
		}
		names = append(names, p)
		for d := path.Dir(path.Clean("/" + p)); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if d != "/" {
			names = append(names, d+"/")
		}
	}
	sort.Strings(names)
	if err := tw.WriteHeader(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		return err
	}
	for _, n := range names {
		name := "." + path.Clean("/"+n)
		if strings.HasSuffix(n, "/") {
			if err := tw.WriteHeader(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				return err
			}
			continue
		}
		body := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return err
		}
	}
	return tw.Close()
}

package deptest

import (
	"bytes"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTreeGofmt fails for a Go file of the module that gofmt would change.
func TestTreeGofmt(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (n == "node_modules" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out, err := format.Source(src)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if !bytes.Equal(src, out) {
			t.Errorf("%s is not gofmt'ed (run gofmt -w)", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

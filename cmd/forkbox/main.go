// Command forkbox is the forkbox CLI and daemon ("forkbox serve").
package main

import (
	"os"

	"github.com/forkbox/forkbox/internal/cli"
)

func main() {
	// The daemon's verbs are wired here, the only place that picks concrete
	// backends (see serve.go).
	cli.ServeFunc = serve
	cli.TemplateBuildFunc = buildTemplate
	os.Exit(cli.Execute())
}

// Command forkbox is the forkbox CLI and daemon ("forkbox serve").
package main

import (
	"os"

	"github.com/forkbox/forkbox/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}

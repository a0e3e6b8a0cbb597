package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/forkbox/forkbox/client"
)

type fw struct{ at time.Time; b strings.Builder }

func (w *fw) Write(p []byte) (int, error) { if w.at.IsZero() { w.at = time.Now() }; return w.b.Write(p) }

func main() {
	ctx := context.Background()
	c := client.New(os.Args[1], os.Args[2])
	for i := 0; i < 8; i++ {
		t0 := time.Now()
		sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 300})
		if err != nil { panic(err) }
		t1 := time.Now()
		var ds []string
		for j := 0; j < 3; j++ {
			s := time.Now()
			w := &fw{}
			_, err := sb.Conn().Exec(ctx, client.ExecOptions{Cmd: []string{"/bin/echo", "hi"}, Stdout: w})
			if err != nil { panic(err) }
			ds = append(ds, fmt.Sprintf("%v/%v", w.at.Sub(s).Round(time.Millisecond), time.Since(s).Round(time.Millisecond)))
		}
		fmt.Println("create", t1.Sub(t0).Round(time.Millisecond), "execs(first-out/done)", ds)
		c.KillSandbox(ctx, sb.SandboxID)
		time.Sleep(time.Duration(len(os.Args[3])) * 500 * time.Millisecond)
	}
}

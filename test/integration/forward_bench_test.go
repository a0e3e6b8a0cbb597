package integration

import (
	"testing"
	"time"

	"github.com/forkbox/forkbox/client"
	"github.com/forkbox/forkbox/internal/daemon/daemontest"
	"github.com/forkbox/forkbox/internal/store/pgtest"
)

// BenchmarkForwarding measures what forwarding adds to a request about a
// sandbox that node b runs: a control-API GET and an envd command
// (`true` through bash), asked of node b itself and of node a, which
// forwards them.
//
//	go test -run '^$' -bench Forwarding -benchtime 200x ./test/integration/
func BenchmarkForwarding(b *testing.B) {
	ctx := daemontest.Context(b)
	url := pgtest.Start(b).NewDatabase(b)
	na, nb := startOnDatabase(b, url, "node-a", 0, nodeArgs...), startOnDatabase(b, url, "node-b", secondIndex(b), nodeArgs...)
	ca, cb := client.New(na.URL, na.APIKey), client.New(nb.URL, na.APIKey)
	sb, err := cb.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base", Timeout: 30 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	for _, via := range []struct {
		name string
		c    *client.Client
	}{{"direct", cb}, {"forwarded", ca}} {
		b.Run("get/"+via.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := via.c.GetSandbox(ctx, sb.SandboxID); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("exec/"+via.name, func(b *testing.B) {
			conn := via.c.Conn(sb.SandboxID, sb.EnvdAccessToken)
			for b.Loop() {
				if code, err := conn.Exec(ctx, client.ExecOptions{Shell: "true"}); err != nil || code != 0 {
					b.Fatal(code, err)
				}
			}
		})
	}
}

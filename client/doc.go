// Package client is the Go SDK for forkbox.
//
// A [Client] talks to the daemon's E2B-compatible control API (create, list,
// kill, pause, snapshot, clone, rollback, …) with an API key. A
// [SandboxConn] talks to the agent inside one sandbox (commands and files)
// through the daemon's data-plane proxy, the same route the E2B SDKs take when
// E2B_SANDBOX_URL is set.
//
//	c := client.New("http://127.0.0.1:3000", os.Getenv("FORKBOX_API_KEY"))
//	sb, err := c.CreateSandbox(ctx, client.CreateOptions{TemplateID: "base"})
//	if err != nil { … }
//	defer c.KillSandbox(context.Background(), sb.SandboxID)
//	code, err := sb.Conn().Exec(ctx, client.ExecOptions{Shell: "echo hi", Stdout: os.Stdout})
//
// Every call takes a context first; cancelling it aborts the request (and, for
// Exec, kills the remote command).
package client

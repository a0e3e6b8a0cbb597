package codeinterp

import "testing"

// BenchmarkRunCode is the round trip of runCode('x+1') against a real
// IPython kernel on the host (no sandbox): the server's and the kernel's
// own cost, without gVisor's.
//
//	go test -run '^$' -bench RunCode -benchtime 200x ./internal/codeinterp/
func BenchmarkRunCode(b *testing.B) {
	ts := newTestServer(b)
	ts.run("x = 1")
	for b.Loop() {
		if got := ts.run("x+1").main(); got == nil || got["text"] != "2" {
			b.Fatalf("x+1 = %v", got)
		}
	}
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/forkbox/forkbox/client"
)

// langCell is one language's trivial cell and the result text it gives
// ("" for bash, whose output is a stream).
type langCell struct{ lang, code, want string }

var langCells = []langCell{
	{"python", "1+1", "2"}, {"javascript", "1+1", "2"}, {"typescript", "1+1", "2"},
	{"r", "1+1", "[1] 2"}, {"java", "1+1", "2"}, {"bash", "echo 2", ""},
}

// The per-language rows join the code interpreter's section.
func init() {
	for i := range sections {
		if sections[i].name != "codeinterp" {
			continue
		}
		for _, c := range langCells {
			sections[i].rows = append(sections[i].rows,
				rowDef{"codeinterp." + c.lang + ".first", c.lang + ": first runCode in a fresh sandbox (kernel start unless prewarmed)", "ms", nil},
				rowDef{"codeinterp." + c.lang + ".rtt", c.lang + ": runCode round trip (`" + c.code + "`)", "ms", nil},
				rowDef{"codeinterp." + c.lang + ".memory", c.lang + ": memUsed growth by its first use, after 3 s idle", "MiB", nil})
		}
		sections[i].intro += " Per language: each timed iteration creates a sandbox and runs every language's cell once " +
			"in this order (python, javascript, typescript, r, java, bash; python and javascript start with the sandbox), " +
			"timing each first call and reading the daemon's `memUsed` 3 s after it; then echo-n round trips per language " +
			"on the last sandbox."
	}
}

// codeInterpLanguages measures each language's first use, round trip and
// memory growth.
func (b *fbBench) codeInterpLanguages(ctx context.Context) {
	first := map[string]*samples{}
	mem := map[string]*samples{}
	for _, c := range langCells {
		first[c.lang], mem[c.lang] = &samples{}, &samples{}
	}
	var last *client.Sandbox
	for i := range b.cfg.n {
		sb, err := b.createInterp(ctx)
		if err != nil {
			b.failLangs(err)
			return
		}
		if last != nil {
			b.kill(ctx, last.SandboxID)
		}
		last = sb
		if err := b.langFirstUses(ctx, sb, i, first, mem); err != nil {
			b.kill(ctx, sb.SandboxID)
			b.failLangs(err)
			return
		}
	}
	defer b.kill(ctx, last.SandboxID)
	for _, c := range langCells {
		b.res.Set("codeinterp."+c.lang+".first", b.side, *first[c.lang])
		b.res.Set("codeinterp."+c.lang+".memory", b.side, *mem[c.lang])
		in := b.interp(last)
		in.lang = c.lang
		var rtt samples
		for range b.cfg.echoN {
			t0 := time.Now()
			if err := in.runCode(ctx, c.code, c.want); err != nil {
				b.res.NA("codeinterp."+c.lang+".rtt", b.side, err.Error())
				break
			}
			rtt.addDur(time.Since(t0))
		}
		if len(rtt) == b.cfg.echoN {
			b.res.Set("codeinterp."+c.lang+".rtt", b.side, rtt)
		}
	}
}

// langFirstUses runs each language's cell once in sb, recording how long
// the call took and how much memUsed grew.
func (b *fbBench) langFirstUses(ctx context.Context, sb *client.Sandbox, iter int, first, mem map[string]*samples) error {
	if _, err := b.interp(sb).runCodeUntil(ctx, "1+1", "2"); err != nil {
		return err
	}
	before, err := b.idleMemUsed(ctx, sb.SandboxID)
	if err != nil {
		return err
	}
	for _, c := range langCells {
		in := b.interp(sb)
		in.lang = c.lang
		t0 := time.Now()
		if err := in.runCode(ctx, c.code, c.want); err != nil {
			return fmt.Errorf("%s: %w", c.lang, err)
		}
		d := time.Since(t0)
		after, err := b.idleMemUsed(ctx, sb.SandboxID)
		if err != nil {
			return err
		}
		slog.Info("forkbox first use", "i", iter, "language", c.lang, "took", d, "memUsed+", after-before)
		first[c.lang].addDur(d)
		mem[c.lang].add(mib(after - before))
		before = after
	}
	return nil
}

// idleMemUsed waits 3 s and returns the daemon's memUsed of id.
func (b *fbBench) idleMemUsed(ctx context.Context, id string) (int64, error) {
	time.Sleep(3 * time.Second)
	m, err := b.c.Metrics(ctx, id)
	if err != nil || len(m) == 0 {
		return 0, fmt.Errorf("metrics: %v", err)
	}
	return m[len(m)-1].MemUsed, nil
}

func (b *fbBench) failLangs(err error) {
	var keys []string
	for _, c := range langCells {
		keys = append(keys, "codeinterp."+c.lang+".first", "codeinterp."+c.lang+".rtt", "codeinterp."+c.lang+".memory")
	}
	b.fail(err, keys...)
}

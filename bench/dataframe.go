package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/forkbox/forkbox/client"
)

// The DataFrame the clone measurement holds: 2,621,440 rows × 10 float64
// columns is exactly 200 MiB of column data.
const (
	dataFrameRows  = 2621440
	dataFrameSetup = "import numpy as np, pandas as pd\n" +
		"df = pd.DataFrame(np.random.default_rng(1).random((2621440, 10)))\n" +
		"int(df.memory_usage(index=False).sum()) >> 20"
	dataFrameCheck = "df.shape"
)

var dataFrameWant = fmt.Sprintf("(%d, 10)", dataFrameRows)

// dataFrameCounts are the clone sizes measured (×1 as the floor of ×10).
var dataFrameCounts = []int{1, 10}

func init() {
	sections = append(sections, sectionDef{name: "dataframe", title: "Clone ×10 of an interpreter holding a 200 MiB DataFrame",
		intro: "A `code-interpreter-v1` sandbox runs `df = pd.DataFrame(np.random.default_rng(1).random((2621440, 10)))` " +
			"(200 MiB of float64 columns, numpy and pandas from Debian) through `runCode`; then `Clone(count=k, strict)` of that " +
			"running sandbox and, in every clone concurrently, `runCode('df.shape')` until it answers `(2621440, 10)`: the wall " +
			"time until all answered (includes the source's snapshot). The interpreter's kernel, its variables and the DataFrame " +
			"are in each clone's memory, so nothing is recomputed. No raw runsc counterpart: with `-prev-bin`, the second column " +
			"is an earlier build's interpreter measured the same way in the same run. Rounds per k as for clones (see header).",
		vs: prevColumn,
		rows: []rowDef{
			{"dataframe.setup", "building the DataFrame in the source (`runCode`)", "ms", nil},
			{"dataframe.memory", "source sandbox memUsed after it", "MiB", nil},
			{"dataframe.clone.1", "clone ×1 → its `df.shape` answers", "ms", nil},
			{"dataframe.clone.10", "clone ×10 → every `df.shape` answers", "ms", nil},
		}})
}

// benchDataFrame measures clones of an interpreter that holds 200 MiB.
func (b *fbBench) benchDataFrame(ctx context.Context) {
	keys := []string{"dataframe.setup", "dataframe.memory", "dataframe.clone.1", "dataframe.clone.10"}
	src, err := b.c.CreateSandbox(ctx, client.CreateOptions{TemplateID: codeInterpreterTemplate, Timeout: sandboxTTL})
	if err != nil {
		b.fail(err, keys...)
		return
	}
	defer b.kill(ctx, src.SandboxID)
	in := b.interp(src)
	if _, err := in.runCodeUntil(ctx, "1+1", "2"); err != nil {
		b.fail(err, keys...)
		return
	}
	t0 := time.Now()
	if err := in.runCode(ctx, dataFrameSetup, "200"); err != nil {
		b.fail(err, keys...)
		return
	}
	b.res.Set("dataframe.setup", b.side, samples{ms(time.Since(t0))})
	if m, err := b.c.Metrics(ctx, src.SandboxID); err == nil && len(m) > 0 {
		b.res.Set("dataframe.memory", b.side, samples{mib(m[len(m)-1].MemUsed)})
	} else {
		b.res.NA("dataframe.memory", b.side, fmt.Sprintf("metrics: %v", err))
	}
	for _, k := range dataFrameCounts {
		key := fmt.Sprintf("dataframe.clone.%d", k)
		var wall samples
		for range b.cfg.cloneReps {
			d, err := b.cloneOnce(ctx, src.SandboxID, k, b.answersDataFrame)
			if err != nil {
				b.fail(err, key)
				break
			}
			wall.addDur(d)
			slog.Info("forkbox dataframe clone", "k", k, "took", d)
		}
		b.res.Set(key, b.side, wall)
	}
}

// answersDataFrame waits until the clone's interpreter still has df.
func (b *fbBench) answersDataFrame(ctx context.Context, sb *client.Sandbox) error {
	_, err := b.interp(sb).runCodeUntil(ctx, dataFrameCheck, dataFrameWant)
	return err
}

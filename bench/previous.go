package main

import (
	"context"
	"os"
)

// runPrevious starts a daemon of an earlier build (-prev-bin, with the
// templates that build made) after the current one has stopped, and runs
// the code interpreter's Python measurements and the DataFrame clones on
// it, into the second column of those sections.
func runPrevious(ctx context.Context, cfg config, res *Results, tmp string) error {
	if cfg.prevBin == "" || !(cfg.want("codeinterp") || cfg.want("dataframe")) {
		return nil
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	d, err := startDaemon(ctx, cfg.prevBin, cfg.prevTemplateDir, tmp, cfg.hugePages, prevNetworkIndex)
	if err != nil {
		return err
	}
	defer d.Stop(context.WithoutCancel(ctx))
	for _, sec := range []string{"codeinterp", "dataframe"} {
		if cfg.want(sec) {
			res.Note(sec, "Previous build column: `%s` with bin `%s` and templates `%s`, started after the current "+
				"build's daemon had stopped.", d.Launcher, cfg.prevBin, cfg.prevTemplateDir)
		}
	}
	b := &fbBench{c: d.Client, d: d, res: res, cfg: cfg, side: Raw}
	if cfg.want("codeinterp") {
		b.codeInterpRTT(ctx)
		b.codeInterpFirst(ctx)
		b.codeInterpMemory(ctx)
	}
	if cfg.want("dataframe") {
		b.benchDataFrame(ctx)
	}
	return nil
}

// who prefixes a note of the previous build's measurements.
func (b *fbBench) who() string {
	if b.side == Raw {
		return "Previous build: "
	}
	return ""
}

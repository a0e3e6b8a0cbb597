package main

import (
	"strconv"
	"strings"
	"time"
)

// workloadPy runs inside sandboxes (raw and forkbox alike). Arguments:
//   - "hog": allocate 256 MiB and touch every page (the brief's
//     bytearray(256<<20) + __setitem__ every 4096 bytes), then print
//     "hogready";
//   - "gap": print "gapready", then tick every 1 ms forever and print
//     "gap <ms> <unix time>" whenever two ticks are more than 3 ms apart.
//     A frozen sandbox cannot tick, so the longest gap during a snapshot
//     is how long the sandbox was frozen, seen from inside it
//     (CLOCK_REALTIME, which gVisor takes from the host);
//
// and then sleep.
const workloadPy = `import sys, time
keep = None
if 'hog' in sys.argv:
    keep = bytearray(256 << 20)
    [keep.__setitem__(i, 1) for i in range(0, len(keep), 4096)]
    print('hogready', flush=True)
if 'gap' in sys.argv:
    last = time.time()
    print('gapready', flush=True)
    while True:
        time.sleep(0.001)
        t = time.time()
        if t - last > 0.003:
            print('gap %.3f %.6f' % ((t - last) * 1000, t), flush=True)
        last = t
time.sleep(86400)
`

// workloadArgv is the argv running workloadPy with modes in the foreground.
func workloadArgv(modes ...string) []string {
	return append([]string{"/usr/bin/python3", "-c", workloadPy}, modes...)
}

// backgroundArgv runs workloadPy with modes detached, output to out.
func backgroundArgv(out string, modes ...string) []string {
	return append([]string{"/bin/sh", "-c", `nohup /usr/bin/python3 -c "$0" "$@" >` + out + ` 2>&1 &`, workloadPy}, modes...)
}

// gapEvent is one reported tick gap.
type gapEvent struct {
	ms float64
	at time.Time
}

// parseGaps extracts gap events from workload output.
func parseGaps(lines []string) []gapEvent {
	var out []gapEvent
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "gap" {
			continue
		}
		g, err1 := strconv.ParseFloat(f[1], 64)
		t, err2 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, gapEvent{ms: g, at: time.Unix(0, int64(t*1e9))})
	}
	return out
}

// maxGap is the longest gap that ended within [from, to+slack]; with no
// gap above the 3 ms reporting threshold it returns 3 (an upper bound).
func maxGap(gaps []gapEvent, from, to time.Time) float64 {
	best := 3.0
	for _, g := range gaps {
		if !g.at.Before(from) && !g.at.After(to.Add(500*time.Millisecond)) && g.ms > best {
			best = g.ms
		}
	}
	return best
}

// freezes is, for each snapshot call's time window, the longest gap the
// ticker workload reported in its output lines during that window.
func freezes(lines []string, windows [][2]time.Time) samples {
	gaps := parseGaps(lines)
	var out samples
	for _, w := range windows {
		out.add(maxGap(gaps, w[0], w[1]))
	}
	return out
}

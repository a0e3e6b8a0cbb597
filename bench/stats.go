package main

import (
	"math"
	"slices"
	"time"
)

// Stat summarises one measured quantity: its sample count, median, 90th
// percentile and maximum, all in the unit of the row it belongs to.
type Stat struct {
	N             int
	P50, P90, Max float64
}

// summarize computes a Stat from raw values; nil when there are none.
func summarize(vals []float64) *Stat {
	if len(vals) == 0 {
		return nil
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	return &Stat{N: len(s), P50: quantile(s, 0.5), P90: quantile(s, 0.9), Max: s[len(s)-1]}
}

// quantile returns the q-quantile of sorted values by linear interpolation
// between closest ranks.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	frac := pos - float64(lo)
	return sorted[lo] + (sorted[hi]-sorted[lo])*frac
}

// ms converts a duration to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// mib converts bytes to MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }

// samples collects values of one quantity.
type samples []float64

func (s *samples) addDur(d time.Duration) { *s = append(*s, ms(d)) }
func (s *samples) add(v float64)          { *s = append(*s, v) }

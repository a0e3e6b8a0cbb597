package cli

import (
	"fmt"
	"strconv"
	"time"
)

// parseSeconds parses a non-negative whole number of seconds argument.
func parseSeconds(s string) (time.Duration, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid seconds %q: want a whole number ≥ 0", s)
	}
	return time.Duration(n) * time.Second, nil
}

// done prints a confirmation, or {"sandboxID":…, "ok":true} with --json.
func (a *app) done(id, msg string) error {
	if a.json {
		return a.printJSON(map[string]any{"sandboxID": id, "ok": true})
	}
	_, err := fmt.Fprintln(a.stdout, msg)
	return err
}

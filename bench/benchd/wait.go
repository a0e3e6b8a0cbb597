package benchd

import (
	"context"
	"fmt"
	"time"

	"github.com/forkbox/forkbox/client"
)

// logPollEvery is how often WaitLog reads the log: the resolution of the
// durations measured with it.
const logPollEvery = 10 * time.Millisecond

// WaitLog polls sandbox id's log until an entry with message msg logged at
// or after since (millisecond precision) appears, or a minute passes: how a
// benchmark sees that an operation the API answers before it is done (a
// pause) has finished.
func WaitLog(ctx context.Context, cl *client.Client, id, msg string, since time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		entries, err := cl.Logs(ctx, id, client.LogsOptions{Search: msg, Cursor: since})
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Message == msg {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no %q in the log of %s: %w", msg, id, ctx.Err())
		case <-time.After(logPollEvery):
		}
	}
}

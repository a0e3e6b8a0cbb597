package codeinterp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// maxStreamBytes bounds the stdout/stderr text one cell may send to the
// client; past it the rest is dropped (the kernel keeps running, so
// end_of_execution still arrives) and one notice is written to stderr.
var maxStreamBytes = 32 << 20

// executeContent is an execute_request's content.
type executeContent struct {
	Code            string         `json:"code"`
	Silent          bool           `json:"silent"`
	StoreHistory    bool           `json:"store_history"`
	UserExpressions map[string]any `json:"user_expressions"`
	AllowStdin      bool           `json:"allow_stdin"`
	StopOnError     bool           `json:"stop_on_error"`
}

// execute runs one cell: the context's base environment and the cell's
// env_vars are applied first and the variables the cell set get back the
// values they had before afterwards. Where the kernel does not count
// silent executions (IPython) both are silent executions of their own;
// where it counts every execution (ijavascript), the set-up is prepended
// to the cell and the restore to the next one, as E2B's server does, so
// execution counts stay the user's.
func (k *jupyterKernel) execute(ctx context.Context, req cellRequest, emit func([]byte)) error {
	if req.silent {
		if k.spec.countsSilent {
			return nil // the kernel is warm once it has answered kernel_info
		}
		return k.runSilent(ctx, req.Code)
	}
	setup, restore := k.pendingRestore, ""
	if len(req.BaseEnv) > 0 {
		setup += k.spec.setEnv(req.BaseEnv) + "\n"
	}
	if len(req.EnvVars) > 0 {
		s, r := k.spec.scopedEnv(req.EnvVars)
		setup, restore = setup+s+"\n", r+"\n"
	}
	code := req.Code
	if k.spec.transform != nil {
		var err error
		if code, err = k.spec.transform(code); err != nil {
			return err
		}
	}
	switch {
	case k.spec.countsSilent:
		code, k.pendingRestore = setup+code, restore
	case setup != "":
		if err := k.runSilent(ctx, setup); err != nil {
			return err
		}
	}
	// stop_on_error makes ipykernel abort requests that arrive just after a
	// failed cell; cells run one at a time here, so it only does harm.
	err := k.run(ctx, executeContent{Code: code, StoreHistory: true}, emit)
	if restore != "" && !k.spec.countsSilent && k.alive() {
		if rerr := k.runSilent(context.WithoutCancel(ctx), restore); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// runSilent runs bookkeeping code; its output is dropped, an error in it
// is returned.
func (k *jupyterKernel) runSilent(ctx context.Context, code string) error {
	var failed *execError
	err := k.run(ctx, executeContent{Code: code, Silent: true}, func(line []byte) {
		var e struct{ Type, Name, Value string }
		if json.Unmarshal(line, &e) == nil && e.Type == "error" && failed == nil {
			failed = &execError{e.Name, e.Value}
		}
	})
	if err == nil && failed != nil {
		err = failed
	}
	return err
}

// run sends one execute_request and forwards the events it causes until
// the kernel is idle again and has replied. Cancelling ctx interrupts the
// kernel (SIGINT to its process group, repeated); one that ignores that for
// the grace period is killed.
func (k *jupyterKernel) run(ctx context.Context, content executeContent, emit func([]byte)) error {
	content.UserExpressions = map[string]any{}
	if !content.Silent {
		k.outOfMemory.Store(false)
	}
	id, err := k.send(k.shell, "execute_request", content)
	if err != nil {
		k.close()
		return k.died()
	}
	var byMessage func()
	if k.spec.interruptMessage {
		byMessage = func() { k.send(k.shell, "interrupt_request", struct{}{}) }
	}
	in := newInterrupter(ctx, k.p, k.grace, byMessage, k.spec.interruptMessage)
	defer in.stop()
	st := &cellState{emit: emit, limit: maxStreamBytes}
	for !st.idle || !st.replied {
		select {
		case m, ok := <-k.in:
			if !ok {
				return k.died()
			}
			if m.msg.ParentHeader.MsgID == id {
				st.handle(m)
			}
		case <-k.p.exited:
			return k.died()
		case <-in.done:
			in.start()
		case <-in.repeat:
			in.resend()
		case <-in.expired:
			k.log.Warn("code interpreter: interrupted cell did not stop; killing its kernel", "kernel", k.spec.name)
			k.close()
			return errStuck
		}
	}
	return nil
}

// cellState maps one execution's Jupyter messages to E2B events.
type cellState struct {
	emit      func([]byte)
	limit     int
	sent      int
	truncated bool
	errored   bool
	idle      bool
	replied   bool
}

func (st *cellState) handle(m jInbound) {
	msg := m.msg
	if m.shell {
		if msg.Header.MsgType == "execute_reply" {
			st.replied = true
			st.reply(msg.Content)
		}
		return
	}
	switch msg.Header.MsgType {
	case "status":
		var c struct {
			State string `json:"execution_state"`
		}
		json.Unmarshal(msg.Content, &c)
		st.idle = c.State == "idle"
	case "stream":
		st.stream(msg)
	case "execute_input":
		var c struct {
			Count int `json:"execution_count"`
		}
		json.Unmarshal(msg.Content, &c)
		st.emit(mustJSON(map[string]any{"type": "number_of_executions", "execution_count": c.Count}))
	case "execute_result", "display_data":
		var c struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		json.Unmarshal(msg.Content, &c)
		st.emit(resultEvent(c.Data, msg.Header.MsgType == "execute_result"))
	case "error":
		st.error(msg.Content)
	}
}

// stream forwards one stream message, within the cell's output budget.
func (st *cellState) stream(msg *jMessage) {
	var c struct{ Name, Text string }
	json.Unmarshal(msg.Content, &c)
	if c.Name != "stdout" && c.Name != "stderr" {
		return
	}
	if st.truncated {
		return
	}
	if st.sent+len(c.Text) > st.limit {
		st.truncated = true
		fit := strings.ToValidUTF8(c.Text[:st.limit-st.sent], "")
		if fit != "" {
			st.emit(mustJSON(map[string]any{"type": c.Name, "text": fit, "timestamp": msg.Header.Date}))
		}
		st.sent += len(fit)
		c.Name = "stderr"
		c.Text = fmt.Sprintf("\n[forkbox: output truncated after %d bytes; the cell kept running]\n", st.sent)
	}
	st.sent += len(c.Text)
	st.emit(mustJSON(map[string]any{"type": c.Name, "text": c.Text, "timestamp": msg.Header.Date}))
}

// jError is the content of error messages and of failed execute_replies.
type jError struct {
	Status    string   `json:"status"`
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// error emits the cell's first error, as E2B does.
func (st *cellState) error(raw json.RawMessage) {
	var e jError
	json.Unmarshal(raw, &e)
	if st.errored {
		return
	}
	st.errored = true
	st.emit(errorEvent(e.Name, e.Value, stripANSI(joinLines(e.Traceback))))
}

// reply reports what only the execute_reply says: an error some kernels
// send nowhere else, or an aborted execution.
func (st *cellState) reply(raw json.RawMessage) {
	var e jError
	json.Unmarshal(raw, &e)
	switch e.Status {
	case "error":
		st.error(raw)
	case "abort", "aborted":
		st.emit(errorEvent("ExecutionAborted", "Execution was aborted", ""))
	}
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n"
		}
		out += l
	}
	return out
}

// execError is a failure reported to the client as an error event with
// this name.
type execError struct {
	Name, Value string
}

func (e *execError) Error() string { return e.Name + ": " + e.Value }

// errStuck reports a cell that ignored interrupts for the grace period.
var errStuck = &execError{"KernelRestarting", "the cell did not stop after an interrupt; its context was restarted"}

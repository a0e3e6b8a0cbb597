package agent

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Which commands a pooled shell runs exactly as `bash -l -c` would. The pooled
// shell evaluates the command with eval, and eval differs from -c in three
// ways a command can see, so those commands start fresh:
//   - syntax errors are worded "eval:" instead of "-c:" (commands that do not
//     parse, with mvdan.cc/sh's bash parser, start fresh);
//   - bash -c execs its last command in place when that is an external
//     program (the pid becomes that program, bash is gone, signals reach
//     the program alone); eval never does, so a command whose last step may
//     be an external program starts fresh;
//   - xtrace prints one more level ("++"), so commands that may switch on
//     tracing or set PS4 start fresh.

// plainBuiltins are bash builtins that bash -c never replaces itself with
// (command and builtin may exec what they run, so they are not here).
var plainBuiltins = map[string]bool{
	":": true, ".": true, "[": true, "alias": true, "bg": true, "bind": true, "break": true, "caller": true,
	"cd": true, "compgen": true, "complete": true, "compopt": true, "continue": true, "declare": true,
	"dirs": true, "disown": true, "echo": true, "enable": true, "eval": true, "exec": true, "exit": true,
	"export": true, "false": true, "fc": true, "fg": true, "getopts": true, "hash": true, "help": true,
	"history": true, "jobs": true, "kill": true, "let": true, "local": true, "logout": true, "mapfile": true,
	"popd": true, "printf": true, "pushd": true, "pwd": true, "read": true, "readarray": true, "readonly": true,
	"return": true, "set": true, "shift": true, "shopt": true, "source": true, "suspend": true, "test": true,
	"times": true, "trap": true, "true": true, "type": true, "typeset": true, "ulimit": true, "umask": true,
	"unalias": true, "unset": true, "wait": true,
}

// evalSafe reports whether bash would run cmd under eval exactly as under -c.
func evalSafe(cmd string) bool {
	for _, s := range []string{"xtrace", "PS4", "set -", "set +", "BASH_XTRACEFD", "verbose"} {
		if strings.Contains(cmd, s) {
			return false
		}
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return false
	}
	if len(f.Stmts) == 0 {
		return true
	}
	return lastStepInShell(f.Stmts[len(f.Stmts)-1])
}

// lastStepInShell reports whether the last command bash runs for st is
// one it runs itself (a builtin, a compound command, an assignment, a
// pipeline or a background job), never one it would exec in place (a
// subshell or `time` may, so they count as unsafe).
func lastStepInShell(st *syntax.Stmt) bool {
	if st.Background || st.Coprocess || st.Negated {
		return true
	}
	switch c := st.Cmd.(type) {
	case *syntax.BinaryCmd:
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			return true
		}
		return lastStepInShell(c.Y)
	case *syntax.CallExpr:
		if len(c.Args) == 0 {
			return true
		}
		name := c.Args[0].Lit()
		return name != "" && len(c.Args[0].Parts) == 1 && plainBuiltins[name]
	case *syntax.Block, *syntax.IfClause, *syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause,
		*syntax.FuncDecl, *syntax.ArithmCmd, *syntax.TestClause, *syntax.DeclClause, *syntax.LetClause:
		return true
	}
	return false
}

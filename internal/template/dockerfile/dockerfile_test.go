package dockerfile

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/forkbox/forkbox/internal/errdefs"
)

func run(cmd string, user ...string) Step {
	return Step{Type: StepRun, Args: append([]string{cmd}, user...)}
}
func cp(src, dest, user, mode string) Step {
	return Step{Type: StepCopy, Args: []string{src, dest, user, mode}}
}
func env(kv ...string) Step     { return Step{Type: StepEnv, Args: kv} }
func workdir(d string) Step     { return Step{Type: StepWorkdir, Args: []string{d}} }
func user(u string) Step        { return Step{Type: StepUser, Args: []string{u}} }
func prologue(s ...Step) []Step { return append([]Step{user("root"), workdir("/")}, s...) }
func epilogue(s ...Step) []Step { return append(prologue(s...), user("user"), workdir("/home/user")) }

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		args      map[string]string
		from      string
		steps     []Step
		start     string
		warnsLike string
	}{
		{name: "minimal", src: "FROM debian:bookworm\n", from: "debian:bookworm", steps: epilogue()},
		{name: "run forms", src: `FROM alpine
RUN apk add curl && \
    echo done
RUN ["echo", "two words", "it's"]
RUN echo $HOME
`, from: "alpine", steps: epilogue(run("apk add curl &&     echo done"), run(`echo 'two words' 'it'\''s'`), run("echo $HOME"))},
		{name: "copy and add", src: `FROM debian
WORKDIR /app
COPY --chown=user:user --chmod=755 a.sh b.sh bin/
COPY . .
ADD conf /etc/conf
`, from: "debian", steps: append(prologue(workdir("/app"),
			cp("a.sh", "/app/bin/", "user:user", "0755"), cp("b.sh", "/app/bin/", "user:user", "0755"),
			cp(".", "/app", "", ""), cp("conf", "/etc/conf", "", "")), user("user"))},
		{name: "env arg expansion", src: `ARG VERSION=12
FROM debian:${VERSION}-slim
ARG GREETING=hello
ENV NAME=world MSG="${GREETING} ${NAME:-there}"
ENV PATH /opt/bin:$PATH
ARG EMPTY
WORKDIR /srv/$NAME
COPY $NAME.txt /srv/
`, args: map[string]string{"GREETING": "hi"}, from: "debian:12-slim", steps: append(prologue(
			env("GREETING", "hi"), env("NAME", "world", "MSG", "hi there"), env("PATH", "/opt/bin:"),
			env("EMPTY", ""), workdir("/srv/world"), cp("world.txt", "/srv/", "", "")), user("user"))},
		{name: "user and relative workdir", src: `FROM debian
USER nobody
WORKDIR /a
WORKDIR b/../c
`, from: "debian", steps: prologue(user("nobody"), workdir("/a"), workdir("/a/c"))},
		{name: "cmd exec", src: "FROM python:3\nCMD [\"python\", \"-m\", \"http.server\", \"8000\"]\n", from: "python:3",
			steps: epilogue(), start: "python -m http.server 8000"},
		{name: "cmd shell", src: "FROM node\nCMD npm start -- --port 3000\n", from: "node", steps: epilogue(),
			start: "npm start -- --port 3000"},
		{name: "entrypoint plus cmd", src: "FROM x\nENTRYPOINT [\"/entry.sh\"]\nCMD [\"serve\", \"--all\"]\n", from: "x",
			steps: epilogue(), start: "/entry.sh serve --all"},
		{name: "entrypoint resets cmd", src: "FROM x\nCMD [\"old\"]\nENTRYPOINT [\"/e\"]\n", from: "x", steps: epilogue(), start: "/e"},
		{name: "shell entrypoint ignores cmd", src: "FROM x\nENTRYPOINT exec /e\nCMD [\"ignored\"]\n", from: "x",
			steps: epilogue(), start: "exec /e"},
		{name: "heredoc script", src: "FROM debian\nRUN <<EOF\napt-get update\napt-get install -y curl\nEOF\n", from: "debian",
			steps: epilogue(run("apt-get update\napt-get install -y curl\n"))},
		{name: "heredoc into a file", src: "FROM debian\nRUN cat > /etc/motd <<EOF\nhello\nEOF\n", from: "debian",
			steps: epilogue(run("cat > /etc/motd <<EOF\nhello\nEOF"))},
		{name: "ignored instructions", src: "FROM debian\nEXPOSE 8080\nLABEL a=b\nVOLUME /data\n", from: "debian",
			steps: epilogue(), warnsLike: "EXPOSE is ignored"},
		{name: "escape directive", src: "# escape=`\nFROM debian\nRUN echo a `\n  b\n", from: "debian", steps: epilogue(run("echo a   b"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.src), Options{BuildArgs: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			if got.FromImage != tc.from {
				t.Errorf("from %q, want %q", got.FromImage, tc.from)
			}
			if !reflect.DeepEqual(got.Steps, tc.steps) {
				t.Errorf("steps\n got %+v\nwant %+v", got.Steps, tc.steps)
			}
			if got.StartCmd != tc.start {
				t.Errorf("start %q, want %q", got.StartCmd, tc.start)
			}
			if (got.StartCmd != "") != (got.ReadyCmd == DefaultReadyCmd) {
				t.Errorf("ready %q with start %q", got.ReadyCmd, got.StartCmd)
			}
			if tc.warnsLike != "" && !strings.Contains(strings.Join(got.Warnings, "\n"), tc.warnsLike) {
				t.Errorf("warnings %q, want one like %q", got.Warnings, tc.warnsLike)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"empty", "", "no instructions"},
		{"no from", "RUN echo hi\n", "no FROM instruction"},
		{"multi-stage", "FROM a AS b\nRUN x\nFROM c\n", "line 3: multi-stage"},
		{"scratch", "FROM scratch\n", "needs a base image"},
		{"unknown instruction", "FROM a\nFROBNICATE x\n", "frobnicate"},
		{"copy one arg", "FROM a\nCOPY onlyone\n", "line 2"},
		{"copy from stage", "FROM a\nCOPY --from=builder /x /y\n", "COPY --from"},
		{"copy outside context", "FROM a\nCOPY ../secret /x\n", "outside the build context"},
		{"copy absolute", "FROM a\nCOPY /etc/passwd /x\n", "outside the build context"},
		{"add url", "FROM a\nADD https://example.com/x /x\n", "ADD of a URL"},
		{"run mount", "FROM a\nRUN --mount=type=cache,target=/c make\n", "RUN --mount"},
		{"bad chmod", "FROM a\nCOPY --chmod=rwx a /b\n", "octal"},
		{"shell", "FROM a\nSHELL [\"/bin/bash\", \"-c\"]\n", "line 2: SHELL"},
		{"onbuild", "FROM a\nONBUILD RUN x\n", "ONBUILD"},
		{"bad env name", "FROM a\nENV 1X=y\n", "variable name"},
		{"unterminated json", "FROM a\nCMD [\"a\"\n", ""},
		{"bad expansion", "FROM a\nWORKDIR ${X:?must be set}\n", "line 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.src), Options{})
			if tc.name == "unterminated json" {
				// BuildKit reads a broken JSON array as the shell form.
				if err != nil || got.StartCmd != `["a"` {
					t.Errorf("got %+v, %v", got, err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, errUnsupported) {
				t.Fatalf("err = %v, want a clear refusal", err)
			}
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

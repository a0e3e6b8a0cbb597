package main

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"gvisor.dev/gvisor/pkg/seccomp/precompiledseccomp"
)

func TestRenderParses(t *testing.T) {
	src := render([]precompiledseccomp.Program{
		{Name: `GOARCH="amd64" Platform="systrap"`, Bytecode32: []uint32{1, 2, 3}, VarOffsets: map[string][]int{"controller_fd": {1}}},
		{Name: "second", Bytecode32: []uint32{4}},
	})
	f, err := parser.ParseFile(token.NewFileSet(), "filter_precompiled.go", src, 0)
	if err != nil {
		t.Fatalf("generated file does not parse: %v\n%s", err, src)
	}
	if f.Name.Name != "filter" {
		t.Errorf("package %s, want filter", f.Name.Name)
	}
	for _, want := range []string{
		"const PrecompilationDisabledAtBuildTime = false",
		"func GetPrecompiled(", "func ListPrecompiled(",
		`programs["GOARCH=\"amd64\" Platform=\"systrap\""]`, `programs["second"]`,
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("generated file lacks %q", want)
		}
	}
}

func TestSentryProgramWanted(t *testing.T) {
	const base = `GOARCH="amd64" Platform="systrap" HostNetwork=false HostNetworkRawSockets=false HostFilesystem=true ` +
		`ProfileEnable=false Instrumentation=false NVProxy=false NVProxyCaps= TPUProxy=false RDMAProxy=false CgoEnabled=false PluginNetwork=false`
	for _, tc := range []struct {
		name string
		want bool
	}{
		{base, true},
		{strings.Replace(base, `Platform="systrap"`, `Platform="kvm"`, 1), false},
		{strings.Replace(base, "NVProxy=false", "NVProxy=true", 1), false},
		{strings.Replace(base, "TPUProxy=false", "TPUProxy=true", 1), false},
		{strings.Replace(base, "RDMAProxy=false", "RDMAProxy=true", 1), false},
		{strings.Replace(base, "CgoEnabled=false", "CgoEnabled=true", 1), false},
		{strings.Replace(base, "HostNetwork=false", "HostNetwork=true", 1), true},
	} {
		if got := sentryProgramWanted(tc.name); got != tc.want {
			t.Errorf("sentryProgramWanted(%s) = %t, want %t", tc.name, got, tc.want)
		}
	}
}

#!/usr/bin/env bash
# Builds the runsc pinned in go.mod, static, with precompiled seccomp
# programs, into $1.
#
# Upstream precompiles runsc's seccomp-bpf programs in its Bazel build; a plain
# `go build` from the module proxy has none, and every sandbox start or restore
# then compiles the sentry's filter at run time (0.1–0.3 s of CPU each here).
# So: copy the pinned gvisor module (Go refuses -overlay on the module cache),
# let tools/seccompgen replace the two filter_precompiled.go files with ones
# that register gVisor's own precompiled programs, and build runsc from that
# copy through a replace directive in a scratch go.mod. The copy is cached per
# gvisor version; the Go build cache makes rebuilds from it fast.
#
# Then the patches in patches/gvisor/*.patch (each says what and why in its
# header) are applied to that copy, in name order; they are part of the
# copy's key, so a changed patch set makes a fresh copy.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: build-runsc.sh OUTPUT}
GO=${GO:-go}

version=$($GO list -m -f '{{.Version}}' gvisor.dev/gvisor)
moddir=$($GO list -m -f '{{.Dir}}' gvisor.dev/gvisor)
if [ -z "$moddir" ]; then
	$GO mod download gvisor.dev/gvisor
	moddir=$($GO list -m -f '{{.Dir}}' gvisor.dev/gvisor)
fi
cache=${FORKBOX_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/forkbox}
src=$cache/gvisor-$version
# The generator's own sources are part of the key: a changed filter regenerates.
# So are the patches and this script.
shopt -s nullglob
patches=(patches/gvisor/*.patch)
shopt -u nullglob
stamp=$(cat tools/seccompgen/*.go internal/runtime/gvisor/runsc.go scripts/build-runsc.sh "${patches[@]}" | sha256sum | cut -c1-16)

if [ "$(cat "$src/.seccomp-precompiled" 2>/dev/null)" != "$stamp" ]; then
	echo ">> precompiling runsc's seccomp programs for gvisor $version (once per version, ~1 min)"
	rm -rf "$src" "$src.tmp"
	mkdir -p "$cache"
	cp -r "$moddir" "$src.tmp"
	chmod -R u+w "$src.tmp"
	# Patches first: the precompiled filters are those of the patched sentry.
	for p in "${patches[@]}"; do
		echo ">> applying $p"
		patch -p1 --batch --forward --quiet -d "$src.tmp" <"$p"
	done
	$GO run ./tools/seccompgen -gvisor-dir "$src.tmp"
	echo "$stamp" >"$src.tmp/.seccomp-precompiled"
	mv "$src.tmp" "$src"
fi

# A scratch go.mod: the project's requirements (so every dependency has the
# version the rest of forkbox is built and tested with) plus the replace.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp go.mod "$work/go.mod"
cp go.sum "$work/go.sum"
$GO mod edit -modfile="$work/go.mod" -replace "gvisor.dev/gvisor=$src"
echo ">> building runsc $version (pinned in go.mod) — first time takes a few minutes"
CGO_ENABLED=0 $GO build -modfile="$work/go.mod" -v -o "$out" gvisor.dev/gvisor/runsc 2>&1 |
	awk '{n++; if (n % 25 == 0) printf "   runsc: %d packages compiled (%s)\n", n, $0}'

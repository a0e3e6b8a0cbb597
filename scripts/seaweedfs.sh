#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (the S3-compatible server the object-store tests
# start) from its Go module at the pinned version, once, and caches it.
#   scripts/seaweedfs.sh OUT   builds (or reuses the cached build) and copies the
#                              binary to OUT
# The module's go.mod has replace directives, so `go install pkg@version` is
# refused: download the module, copy it to a writable place and build ./weed
# inside it. The build takes several minutes on two cores; the result is kept
# under $DATA_DIR/cache (default /var/lib/forkbox/cache) keyed by version.
set -euo pipefail
out=${1:?usage: $0 OUT}
version=v0.0.0-20261109003541-7506e5f91cd6
data_dir=${DATA_DIR:-/var/lib/forkbox}
cache=$data_dir/cache/weed-$version
GO=${GO:-go}

if [ ! -x "$cache" ]; then
	echo ">> building SeaweedFS $version (once; cached at $cache)" >&2
	mkdir -p "$data_dir/cache"
	dir=$("$GO" mod download -json "github.com/seaweedfs/seaweedfs@$version" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] && [ -d "$dir" ] || { echo "seaweedfs: go mod download gave no module directory" >&2; exit 1; }
	work=$(mktemp -d "$data_dir/cache/weed-build.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	cp -r "$dir/." "$work/src"
	chmod -R u+w "$work/src"
	# GOFLAGS=-mod=mod: the module ships no vendor dir; its go.sum is complete.
	(cd "$work/src" && CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" build -trimpath -ldflags='-s -w' -o "$work/weed" ./weed)
	mv "$work/weed" "$cache.tmp" && mv "$cache.tmp" "$cache"
fi
# Already copied (and not older than the cached build): nothing to do.
if [ -x "$out" ] && [ ! "$cache" -nt "$out" ]; then
	exit 0
fi
mkdir -p "$(dirname "$out")"
cp "$cache" "$out.tmp" && mv "$out.tmp" "$out"

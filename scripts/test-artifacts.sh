#!/usr/bin/env bash
# Lists the artifacts a `go test -artifacts -outputdir DIR` run kept (what
# tests wrote to t.ArtifactDir(): Go puts each test's under
# DIR/_artifacts/<random>/), for CI to collect and for a person to open.
#
#   scripts/test-artifacts.sh [--require NAME]... DIR
#
# --require NAME fails unless a file named NAME was kept: `make test` requires
# the dashboard's browser screenshot, so a run that lost it (say, without
# -artifacts, when Go removes each test's directory) fails loudly.
set -euo pipefail

required=()
while [ $# -gt 1 ]; do
	case "$1" in
	--require) required+=("$2"); shift 2 ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || { echo "usage: $0 [--require NAME]... DIR" >&2; exit 2; }
dir=$1

echo ">> test artifacts kept in $dir:"
found=0
if [ -d "$dir/_artifacts" ]; then
	while IFS= read -r f; do
		echo "   $f ($(stat -c %s "$f") bytes)"
		found=$((found + 1))
	done < <(find "$dir/_artifacts" -type f | sort)
fi
[ "$found" -gt 0 ] || echo "   (none)"

missing=0
for name in "${required[@]}"; do
	if [ -z "$(find "$dir/_artifacts" -type f -name "$name" -size +0 2>/dev/null | head -n 1)" ]; then
		echo "test artifacts: $name was not kept in $dir/_artifacts" >&2
		missing=1
	fi
done
exit "$missing"

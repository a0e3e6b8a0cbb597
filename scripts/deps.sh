#!/usr/bin/env bash
# Installs what forkbox and its tests need on a fresh Debian/Ubuntu machine.
# Idempotent and quick when everything is there already.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v nft >/dev/null || need+=(nftables)
command -v ip >/dev/null || need+=(iproute2)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
# The code interpreter's unit tests run Debian's IPython kernel with these libraries.
/usr/bin/python3 -c 'import ipykernel, matplotlib, pandas, numpy' 2>/dev/null ||
	need+=(python3-ipykernel python3-matplotlib python3-pandas python3-numpy)
command -v pgrep >/dev/null || need+=(procps)
# internal/oci builds a static busybox image (no libc, no bash) for its tests.
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
	echo ">> apt-get install ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "deps: Go is required (https://go.dev/dl) — not found on PATH" >&2; exit 1; }

# The end-to-end tests drive the daemon with the real, unmodified npm clients.
if [ -f test/e2e/js/package.json ]; then
	if [ ! -d test/e2e/js/node_modules ] || [ test/e2e/js/package-lock.json -nt test/e2e/js/node_modules ]; then
		echo ">> npm ci (E2B clients for the end-to-end tests)"
		(cd test/e2e/js && npm ci --no-audit --no-fund --loglevel=error)
		touch test/e2e/js/node_modules
	fi
fi

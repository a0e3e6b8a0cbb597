#!/usr/bin/env bash
# Installs what forkbox needs on a fresh Debian/Ubuntu machine.
#   scripts/deps.sh serve   what serving needs (make serve): debootstrap, nftables, iproute2,
#                           e2fsprogs (volumes)
#   scripts/deps.sh test    that plus what the tests need (make test): Node.js/npm and the
#                           npm E2B clients, Debian's Python libraries, procps, systemd-analyze
#                           (the unit file check), Chromium (the dashboard's browser test),
#                           PostgreSQL (the store's conformance suite, --database tests)
#                           and SeaweedFS's weed in bin/ (the object-store tests' S3 server,
#                           built once from its Go module: scripts/seaweedfs.sh)
# Without an argument it installs everything (test). Idempotent and quick when
# everything is there already.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
case "$mode" in
serve | test) ;;
*) echo "usage: $0 [serve|test]" >&2; exit 2 ;;
esac

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v nft >/dev/null || need+=(nftables)
command -v ip >/dev/null || need+=(iproute2)
# Volumes are ext4 image files (internal/volumes formats each one).
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
if [ "$mode" = test ]; then
	command -v node >/dev/null || need+=(nodejs)
	command -v npm >/dev/null || need+=(npm)
	# The code interpreter's unit tests run Debian's IPython kernel with these libraries.
	/usr/bin/python3 -c 'import ipykernel, matplotlib, pandas, numpy' 2>/dev/null ||
		need+=(python3-ipykernel python3-matplotlib python3-pandas python3-numpy)
	# ... and the R, bash and Java kernels, checked by Debian's kernel conformance suite.
	dpkg -s r-cran-irkernel python3-metakernel default-jdk-headless python3-jupyter-kernel-test >/dev/null 2>&1 ||
		need+=(r-cran-irkernel python3-metakernel default-jdk-headless python3-jupyter-kernel-test)
	command -v pgrep >/dev/null || need+=(procps)
	# The kernel conformance test runs npm's ijavascript on the host: its zeromq
	# module builds against Debian's libzmq (its own build would download
	# libzmq from GitHub). Serving needs none of it: the code-interpreter
	# template installs ijavascript inside its own rootfs.
	command -v ijskernel >/dev/null || need+=(libzmq3-dev g++ make)
	command -v systemd-analyze >/dev/null || need+=(systemd)
	# internal/oci builds a static busybox image (no libc, no bash) for its tests.
	dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
	command -v chromium >/dev/null || need+=(chromium)
	# internal/store/pgtest runs Debian's PostgreSQL (initdb into a temp dir) for the
	# store conformance suite and the --database integration tests.
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
fi
if [ ${#need[@]} -gt 0 ]; then
	echo ">> apt-get install ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "deps: Go is required (https://go.dev/dl) — not found on PATH" >&2; exit 1; }
[ "$mode" = test ] || exit 0

if ! command -v ijskernel >/dev/null; then
	echo ">> npm install -g ijavascript (the JavaScript kernel, for the host-side kernel conformance test)"
	npm_config_zmq_external=true npm install -g --no-audit --no-fund --loglevel=error ijavascript
fi

# The end-to-end tests drive the daemon with the real, unmodified npm clients.
if [ -f test/e2e/js/package.json ]; then
	if [ ! -d test/e2e/js/node_modules ] || [ test/e2e/js/package-lock.json -nt test/e2e/js/node_modules ]; then
		echo ">> npm ci (E2B clients for the end-to-end tests)"
		(cd test/e2e/js && npm ci --no-audit --no-fund --loglevel=error)
		touch test/e2e/js/node_modules
	fi
fi

# The object-store tests start a real S3 server: SeaweedFS, built once from
# its Go module at a pinned version and cached under the data dir.
scripts/seaweedfs.sh bin/weed

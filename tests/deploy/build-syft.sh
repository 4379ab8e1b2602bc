#!/usr/bin/env bash
# Build syft, the SBOM generator of scripts/release, into a cache OUTSIDE the repository
# (~/.cache/syft/<version>/syft), from the Go module proxy, like build-helm.sh.
# Idempotent: a cached binary of the pinned version is reused. Prints the path and the build time.
set -euo pipefail
SYFT=v1.57.2
OUT="${SYFT_CACHE:-$HOME/.cache/syft/$SYFT}"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath
if [ -x "$OUT/syft" ]; then echo "syft $SYFT cached in $OUT"; exit 0; fi
command -v go >/dev/null || { echo "build-syft.sh: no Go toolchain on PATH" >&2; exit 3; }
mkdir -p "$OUT"
t0=$SECONDS
echo "== build step: syft $SYFT"
GOBIN="$OUT" go install -ldflags "-s -w -X main.version=$SYFT" "github.com/anchore/syft/cmd/syft@$SYFT"
"$OUT/syft" version | head -2
echo "== build step: syft took $((SECONDS - t0)) s"

#!/usr/bin/env bash
# Build the Helm CLI used by tests/deploy/test_chart.py into a cache OUTSIDE the repository
# (~/.cache/helm/<version>/helm), from the Go module proxy, like tests/controlplane/build.sh.
# Idempotent: a cached binary of the pinned version is reused. Prints the path and the build time.
set -euo pipefail
HELM=v3.22.0
OUT="${HELM_CACHE:-$HOME/.cache/helm/$HELM}"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath
if [ -x "$OUT/helm" ]; then echo "helm $HELM cached in $OUT"; exit 0; fi
command -v go >/dev/null || { echo "build-helm.sh: no Go toolchain on PATH" >&2; exit 3; }
mkdir -p "$OUT"
t0=$SECONDS
echo "== build step: helm $HELM"
GOBIN="$OUT" go install -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM" \
  "helm.sh/helm/v3/cmd/helm@$HELM"
"$OUT/helm" version --short
echo "== build step: helm took $((SECONDS - t0)) s"

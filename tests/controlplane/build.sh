#!/usr/bin/env bash
# Build the control-plane binaries used by the e2e tests into a cache OUTSIDE the repository.
# kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes via the wrapper module
# in go.mod.wrapper), kubectl (the same wrapper in a module of its own, so the control plane's
# go.sum stays as it was), etcd and kwok, all from the Go module proxy. Idempotent: each binary is
# built only when missing; "$OUT/.complete" marks a full set. Prints the wall time of every step.
# Recipe: ../shared/design/controlplane.md sections 1.3-1.5.
set -euo pipefail
K8S=v1.36.3; MINOR=36; ETCD=v3.6.8; KWOK=v0.8.0
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${K8S_TESTBIN:-$HOME/.cache/k8s-testbin/$K8S}"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath
if [ -f "$OUT/.complete" ] && [ -x "$OUT/bin/kubectl" ]; then echo "control plane binaries cached in $OUT"; exit 0; fi
command -v go >/dev/null || { echo "build.sh: no Go toolchain on PATH" >&2; exit 3; }
mkdir -p "$OUT/bin" "$OUT/k8s" "$OUT/kubectl" "$OUT/etcd"

step() { local name=$1; shift; local t0=$SECONDS; echo "== build step: $name"; "$@"; echo "== build step: $name took $((SECONDS - t0)) s"; }

build_k8s() {
  cd "$OUT/k8s"
  if [ ! -f go.sum ] || ! cmp -s "$HERE/go.mod.wrapper" go.mod.wrapper; then
    cp "$HERE/go.mod.wrapper" go.mod; cp "$HERE/go.mod.wrapper" go.mod.wrapper; rm -f go.sum
    go get -tool k8s.io/kubernetes/cmd/kube-apiserver@$K8S k8s.io/kubernetes/cmd/kube-controller-manager@$K8S \
      k8s.io/kubernetes/cmd/kube-scheduler@$K8S
  fi
  go build -ldflags "-s -w $(k8s_version_flags)" -o "$OUT/bin/" k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
  "$OUT/bin/kube-apiserver" --version
}

k8s_version_flags() {
  local ver="-X k8s.io/component-base/version.gitVersion=$K8S -X k8s.io/component-base/version.gitMajor=1"
  ver="$ver -X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean"
  ver="$ver -X k8s.io/client-go/pkg/version.gitVersion=$K8S -X k8s.io/client-go/pkg/version.gitMajor=1"
  echo "$ver -X k8s.io/client-go/pkg/version.gitMinor=$MINOR"
}

# kubectl: the tests run `kubectl explain` and `kubectl apply` as a user would
build_kubectl() {
  cd "$OUT/kubectl"
  if [ ! -f go.sum ] || ! cmp -s "$HERE/go.mod.wrapper" go.mod.wrapper; then
    sed 's#^module .*#module localtest/kubectlbin#' "$HERE/go.mod.wrapper" > go.mod
    cp "$HERE/go.mod.wrapper" go.mod.wrapper; rm -f go.sum
    go get -tool k8s.io/kubernetes/cmd/kubectl@$K8S
  fi
  go build -ldflags "-s -w $(k8s_version_flags)" -o "$OUT/bin/kubectl" k8s.io/kubernetes/cmd/kubectl
  "$OUT/bin/kubectl" version --client
}

build_etcd() {
  cd "$OUT/etcd"
  printf 'module localtest/etcdbin\n\ngo 1.26.0\n' > go.mod; rm -f go.sum
  go get -tool go.etcd.io/etcd/server/v3@$ETCD
  go build -ldflags "-s -w" -o "$OUT/bin/etcd" go.etcd.io/etcd/server/v3
  "$OUT/bin/etcd" --version
}

build_kwok() {
  GOBIN="$OUT/bin" go install -ldflags "-s -w" sigs.k8s.io/kwok/cmd/kwok@$KWOK
  "$OUT/bin/kwok" --version || true
}

[ -x "$OUT/bin/etcd" ] || step etcd build_etcd
[ -x "$OUT/bin/kube-apiserver" ] && [ -x "$OUT/bin/kube-controller-manager" ] && [ -x "$OUT/bin/kube-scheduler" ] \
  || step kubernetes build_k8s
[ -x "$OUT/bin/kwok" ] || step kwok build_kwok
[ -x "$OUT/bin/kubectl" ] || step kubectl build_kubectl
touch "$OUT/.complete"
echo "control plane binaries ready in $OUT"

#!/usr/bin/env bash
# Builds the pinned kube-apiserver, kube-controller-manager and etcd from their
# Go modules with the machine's Go toolchain, into a cache keyed by version.
# A second run with the same versions does nothing and prints the cached paths.
# --node adds the test node's kubelet and kube-proxy (same Kubernetes module)
# and its pause program; --helm adds the helm CLI the chart tests run.
#
# Usage: conformance/cluster/build.sh [--node] [--helm]   # build if missing, print bin dirs
# Env:   BINDERY_CACHE_DIR (default ~/.cache/bindery)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${BINDERY_CACHE_DIR:-$HOME/.cache/bindery}
goos_arch=$(go env GOOS)-$(go env GOARCH)

kube_dir=$cache/bin/kubernetes-$KUBERNETES_VERSION-$goos_arch
etcd_dir=$cache/bin/etcd-$ETCD_VERSION-$goos_arch
node_dir=$cache/bin/kubernetes-node-$KUBERNETES_VERSION-$goos_arch
helm_dir=$cache/bin/helm-$HELM_VERSION-$goos_arch
# The pause program is the project's own: keyed by its source's hash.
pause_dir=$cache/bin/pause-$(cat "$here/gobuild/pause/go.mod" "$here/gobuild/pause/main.go" | sha256sum | cut -c1-16)-$goos_arch

want_node=false want_helm=false
for arg in "$@"; do
  case $arg in
    --node) want_node=true ;;
    --helm) want_helm=true ;;
    *) echo "build.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

check_pin() { # module-dir expected-version
  grep -q " $2\$" "$1/go.mod" || {
    echo "build.sh: $1/go.mod does not pin $2 (versions.env and go.mod disagree)" >&2
    exit 1
  }
}
check_pin "$here/gobuild/kubernetes" "$KUBERNETES_VERSION"
check_pin "$here/gobuild/etcd" "$ETCD_VERSION"
check_pin "$here/gobuild/helm" "$HELM_VERSION"

build_into() { # out-dir module-dir ldflags package...
  local out=$1 mod=$2 ldflags=$3
  shift 3
  if [ -f "$out/.complete" ]; then return 0; fi
  local tmp
  tmp=$(mktemp -d "$cache/bin/.build.XXXXXX")
  echo "building $* ($(go version | awk '{print $3}')) into $out; the first build takes several minutes" >&2
  for pkg in "$@"; do
    (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ldflags" -o "$tmp/" "$pkg")
  done
  touch "$tmp/.complete"
  rm -rf "$out"
  mv "$tmp" "$out"
}

mkdir -p "$cache/bin"
version_pkg=k8s.io/component-base/version
major_minor=${KUBERNETES_VERSION#v}
kube_ldflags="-s -w -X $version_pkg.gitVersion=$KUBERNETES_VERSION -X $version_pkg.gitMajor=${major_minor%%.*} -X $version_pkg.gitMinor=$(echo "$major_minor" | cut -d. -f2) -X $version_pkg.gitTreeState=clean"
build_into "$kube_dir" "$here/gobuild/kubernetes" "$kube_ldflags" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
build_into "$etcd_dir" "$here/gobuild/etcd" "-s -w" .
echo "KUBE_BIN_DIR=$kube_dir"
echo "ETCD_BIN_DIR=$etcd_dir"
if $want_node; then
  build_into "$node_dir" "$here/gobuild/kubernetes" "$kube_ldflags" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler
  build_into "$pause_dir" "$here/gobuild/pause" "-s -w" .
  echo "KUBE_NODE_BIN_DIR=$node_dir"
  echo "PAUSE_BIN_DIR=$pause_dir"
fi
if $want_helm; then
  build_into "$helm_dir" "$here/gobuild/helm" "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    helm.sh/helm/v3/cmd/helm
  echo "HELM_BIN_DIR=$helm_dir"
fi

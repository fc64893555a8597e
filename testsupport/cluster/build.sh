#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and the node's kube-scheduler, kubelet and
# kube-proxy from the k8s.io/kubernetes release pinned in
# go.mod into a cache outside the repository, and prints the directory holding them; also
# installs helm (the chart tests render and lint deploy/helm/rouse with it) into
# <cache>/helm-<version>/. Skips each build whose binary is already there (the cache key is the
# pinned version).
#
#   testsupport/cluster/build.sh            # prints e.g. /root/.cache/rouse/kube-v1.35.4
#
# Environment: GO (default: go on PATH, else /usr/local/go/bin/go), ROUSE_KUBE_CACHE (default
# $XDG_CACHE_HOME/rouse or ~/.cache/rouse), GOFLAGS (default -p=1, one package compiling at a
# time: slower, but a shared machine stays usable; CI passes -p=$(nproc)).
#
# To move to another release: change the k8s.io/kubernetes version in go.mod and every k8s.io
# staging module's version in its replace block to the matching v0.x, then `go mod tidy`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
version="$(awk '{ m = ($1 == "require") ? $2 : $1; v = ($1 == "require") ? $3 : $2 }
                m == "k8s.io/kubernetes" { print v; exit }' "$here/go.mod")"
[ -n "$version" ] || { echo "build.sh: no k8s.io/kubernetes requirement in $here/go.mod" >&2; exit 1; }
# The chart tests' helm; testsupport/src/cluster/mod.rs reads this line.
helm_version=v4.3.2
cache="${ROUSE_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rouse}"
out="$cache/kube-$version"
export GOFLAGS="${GOFLAGS:--p=1}" CGO_ENABLED=0 GOTOOLCHAIN=local
if [ ! -x "$cache/helm-$helm_version/helm" ]; then
    # Outside our module: `go install pkg@version` builds helm's own pinned dependencies.
    (cd / && GOBIN="$cache/helm-$helm_version" "$go" install "helm.sh/helm/v4/cmd/helm@$helm_version" >&2)
fi
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
missing=()
for cmd in "${cmds[@]}"; do [ -x "$out/$cmd" ] || missing+=("$cmd"); done
if [ ${#missing[@]} -eq 0 ]; then
    echo "$out"
    exit 0
fi
mkdir -p "$out"
cd "$here"
# Stamp the version the way Kubernetes' own build does, so /version reports the release.
minor="${version#v1.}"; minor="${minor%%.*}"
pkg=k8s.io/component-base/version
ldflags="-s -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
for cmd in "${missing[@]}"; do
    # Build under a temporary name first so an interrupted build never looks cached.
    "$go" build -trimpath -ldflags="$ldflags" -o "$out/.$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" >&2
    mv "$out/.$cmd.tmp" "$out/$cmd"
done
echo "$out"

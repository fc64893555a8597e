#!/usr/bin/env bash
# Builds, from the versions pinned in go.mod, into a cache outside the repository:
#
#   <cache>/agent-sandbox-<version>/e2e.test             upstream's end-to-end suite (test/e2e)
#   <cache>/agent-sandbox-<version>/e2e-extensions.test  its extensions suite (test/e2e/extensions)
#   <cache>/agent-sandbox-<version>/agent-sandbox-controller   upstream's controller
#   <cache>/agent-sandbox-<version>/manifests.yaml       its CRDs and RBAC (k8s/crds/*.yaml,
#                                                        k8s/*rbac.generated.yaml), for the
#                                                        scale benchmark's run of it
#   <cache>/agent-sandbox-<version>/sandboxd             upstream's sandboxd daemon (static), packed
#                                                        into the image its e2e test runs
#   <cache>/kwok-<version>/kwok                          kwok, which simulates a node
#   <cache>/kwok-<version>/stages.yaml                   kwok's own node and pod stages, and
#                                                        ours (stages/*.yaml, see there);
#                                                        written on every run (it is only a
#                                                        concatenation, and follows edits)
#
# and prints one line per program, `<name> <path>`, for tests and benchmarks to read:
#
#   testsupport/upstream/build.sh               # e2e, e2e-extensions, controller, upstream-manifests, sandboxd, kwok, kwok-stages
#   testsupport/upstream/build.sh --print kwok  # only the path of one (built if missing)
#
# Each program is built only when missing (the cache key is the pinned version). Environment:
# Needs Go 1.26 or newer (upstream v1.0.1 asks for it) and the Go module proxy.
# GO (default: go on PATH, else /usr/local/go/bin/go), ROUSE_KUBE_CACHE (default
# $XDG_CACHE_HOME/rouse or ~/.cache/rouse), GOFLAGS (default -p=1, one package compiling at a
# time so a shared machine stays usable; CI passes -p=$(nproc)).
#
# To move to another release: `go get sigs.k8s.io/agent-sandbox@vX sigs.k8s.io/kwok@vY`,
# `go mod tidy`, and check that `go list -test -deps` of both suites reports no missing go.sum
# entry (tools.go lists the packages only upstream's test files import).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
version_of() {
    awk -v m="$1" '{ mod = ($1 == "require") ? $2 : $1; v = ($1 == "require") ? $3 : $2 }
                   mod == m { print v; exit }' "$here/go.mod"
}
sandbox_version="$(version_of sigs.k8s.io/agent-sandbox)"
kwok_version="$(version_of sigs.k8s.io/kwok)"
[ -n "$sandbox_version" ] && [ -n "$kwok_version" ] ||
    { echo "build.sh: sigs.k8s.io/agent-sandbox or sigs.k8s.io/kwok missing from $here/go.mod" >&2; exit 1; }
cache="${ROUSE_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rouse}"
sandbox_dir="$cache/agent-sandbox-$sandbox_version"
kwok_dir="$cache/kwok-$kwok_version"

declare -A path=(
    [e2e]="$sandbox_dir/e2e.test"
    [e2e-extensions]="$sandbox_dir/e2e-extensions.test"
    [controller]="$sandbox_dir/agent-sandbox-controller"
    [upstream-manifests]="$sandbox_dir/manifests.yaml"
    [sandboxd]="$sandbox_dir/sandboxd"
    [kwok]="$kwok_dir/kwok"
    [kwok-stages]="$kwok_dir/stages.yaml"
)
order=(e2e e2e-extensions controller upstream-manifests sandboxd kwok kwok-stages)
only=""
if [ "${1:-}" = "--print" ]; then
    only="${2:?usage: build.sh [--print e2e|e2e-extensions|controller|upstream-manifests|sandboxd|kwok|kwok-stages]}"
    [ -n "${path[$only]:-}" ] || { echo "build.sh: no program named $only" >&2; exit 2; }
fi

export GOFLAGS="${GOFLAGS:--p=1}" CGO_ENABLED=0 GOTOOLCHAIN=local
cd "$here"

# Writes under a temporary name first, so an interrupted build never looks cached.
build() {
    local name="$1" out="${path[$1]}"
    [ -e "$out" ] && [ "$name" != kwok-stages ] && return 0
    mkdir -p "$(dirname "$out")"
    case "$name" in
        e2e) "$go" test -c -trimpath -o "$out.tmp" sigs.k8s.io/agent-sandbox/test/e2e >&2 ;;
        e2e-extensions) "$go" test -c -trimpath -o "$out.tmp" sigs.k8s.io/agent-sandbox/test/e2e/extensions >&2 ;;
        controller) "$go" build -trimpath -o "$out.tmp" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller >&2 ;;
        upstream-manifests)
            local k8s
            k8s="$("$go" list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)/k8s"
            for f in "$k8s"/crds/*.yaml "$k8s"/rbac.generated.yaml "$k8s"/extensions-rbac.generated.yaml; do
                echo "---"
                cat "$f"
            done > "$out.tmp"
            ;;
        # As upstream's packages/sandboxd/Dockerfile builds it (static, symbols stripped).
        sandboxd) "$go" build -trimpath -ldflags="-s -w" -o "$out.tmp" sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd >&2 ;;
        kwok) "$go" build -trimpath -o "$out.tmp" sigs.k8s.io/kwok/cmd/kwok >&2 ;;
        kwok-stages)
            # kwok's own stages from its module: the node made Ready and kept alive; a pod
            # Running and Ready as soon as it is bound (the "fast" stage: no random start
            # delay, which upstream's tests with short deadlines cannot afford); a deleted pod
            # removed once its grace period is over and its finalizers are gone (the
            # "general" stage). Then ours.
            local src
            src="$("$go" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
            {
                for f in "$src"/node/fast/node-initialize.yaml "$src"/node/heartbeat/node-heartbeat.yaml \
                    "$src"/pod/fast/pod-ready.yaml "$src"/pod/general/pod-delete.yaml \
                    "$here"/stages/*.yaml; do
                    echo "---"
                    cat "$f"
                done
            } > "$out.tmp"
            ;;
    esac
    mv "$out.tmp" "$out"
}

if [ -n "$only" ]; then
    build "$only"
    echo "${path[$only]}"
    exit 0
fi
for name in "${order[@]}"; do
    build "$name"
    echo "$name ${path[$name]}"
done

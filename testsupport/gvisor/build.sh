#!/usr/bin/env bash
# Builds gVisor's runsc and its containerd shim from the gvisor.dev/gvisor pseudo-version pinned
# in go.mod into a cache outside the repository, and prints the directory holding them:
#
#   testsupport/gvisor/build.sh            # prints e.g. /root/.cache/rouse/gvisor-v0.0.0-2026...
#
#   <dir>/runsc                            the runtime: `rouse up`'s gvisor runtime and the node's
#                                          RuntimeClass gvisor
#   <dir>/gvisor-shim                      containerd-shim-runsc-v1, built from a patched copy
#   <dir>/shimbin/containerd-shim-runsc-v1 a wrapper for containerd 1.6; put <dir>/shimbin first
#                                          on containerd's PATH
#
# Skips each build whose output is already there (the cache key is the pinned version).
#
# Two local workarounds, both for the shim only (runsc is built from the module as published):
# 1. The shim lowers its own oom_score_adj to -999 and fails the container start when it
#    cannot ("failed to set OOM Score on shim: ... permission denied"). Lowering needs
#    CAP_SYS_RESOURCE, which hosts without it (some VMs and nested containers) lack. The shim
#    is built from a copy of the module in which that error is ignored when it is a permission
#    error: a `replace` to the copy (`go build -overlay` refuses files in the module cache).
# 2. The shim is built on containerd 2's shim library, whose `start` prints JSON bootstrap
#    parameters ({"version":2,"address":"unix://...","protocol":"ttrpc"}); containerd 1.6 (the
#    Debian package) reads a bare address and fails with "dial unix {...}: invalid argument".
#    The wrapper prints only the address for `start` and runs the shim unchanged otherwise.
#
# Environment: GO (default: go on PATH, else /usr/local/go/bin/go), ROUSE_KUBE_CACHE (default
# $XDG_CACHE_HOME/rouse or ~/.cache/rouse, shared with testsupport/cluster/build.sh), GOFLAGS
# (default -p=1; CI passes -p=$(nproc)).
#
# To move to a newer gVisor: `go get gvisor.dev/gvisor@latest && go mod tidy` here, then check
# that the patch below still applies (the build fails naming the file when it does not).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
go="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
version="$(awk '{ m = ($1 == "require") ? $2 : $1; v = ($1 == "require") ? $3 : $2 }
                m == "gvisor.dev/gvisor" { print v; exit }' "$here/go.mod")"
[ -n "$version" ] || { echo "build.sh: no gvisor.dev/gvisor requirement in $here/go.mod" >&2; exit 1; }
cache="${ROUSE_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rouse}"
out="$cache/gvisor-$version"
export GOFLAGS="${GOFLAGS:--p=1}" CGO_ENABLED=0 GOTOOLCHAIN=local
if [ -x "$out/runsc" ] && [ -x "$out/gvisor-shim" ] && [ -x "$out/shimbin/containerd-shim-runsc-v1" ]; then
    echo "$out"
    exit 0
fi
mkdir -p "$out/shimbin"
cd "$here"

if [ ! -x "$out/runsc" ]; then
    # Build under a temporary name first so an interrupted build never looks cached.
    # Stamp the version, as gVisor's own release build does, so `runsc --version` names it.
    "$go" build -trimpath -ldflags="-s -X gvisor.dev/gvisor/runsc/version.version=$version" \
        -o "$out/.runsc.tmp" gvisor.dev/gvisor/runsc >&2
    mv "$out/.runsc.tmp" "$out/runsc"
fi

if [ ! -x "$out/gvisor-shim" ]; then
    modcache="$("$go" env GOMODCACHE)"
    "$go" mod download gvisor.dev/gvisor >&2
    src="$out/src"
    rm -rf "$src"
    cp -r "$modcache/gvisor.dev/gvisor@$version" "$src"
    chmod -R u+w "$src"
    manager="$src/pkg/shim/v1/manager.go"
    # Workaround 1 (see the top of this file).
    needle='if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {'
    grep -qF "$needle" "$manager" || {
        echo "build.sh: $manager changed; the oom_score_adj workaround no longer applies" >&2
        exit 1
    }
    sed -i "s/if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {/if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil \&\& !os.IsPermission(err) {/" "$manager"
    grep -qF '!os.IsPermission(err)' "$manager"
    # The same module, with gvisor.dev/gvisor replaced by the patched copy.
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    cp go.mod go.sum "$work/"
    echo "replace gvisor.dev/gvisor => $src" >> "$work/go.mod"
    "$go" build -modfile="$work/go.mod" -trimpath -ldflags=-s -o "$out/.gvisor-shim.tmp" \
        gvisor.dev/gvisor/shim >&2
    mv "$out/.gvisor-shim.tmp" "$out/gvisor-shim"
    rm -rf "$src"
fi

# Workaround 2 (see the top of this file).
cat > "$out/shimbin/.containerd-shim-runsc-v1.tmp" <<EOF
#!/bin/sh
# containerd 1.6 reads a bare address from \`start\`; this shim prints JSON bootstrap
# parameters. Written by testsupport/gvisor/build.sh.
shim="$out/gvisor-shim"
for a in "\$@"; do last="\$a"; done
if [ "\$last" = start ]; then
  out=\$("\$shim" "\$@") || exit \$?
  printf '%s' "\$out" | sed -n 's/.*"address":"\\([^"]*\\)".*/\\1/p' | tr -d '\\n'
else
  exec "\$shim" "\$@"
fi
EOF
chmod +x "$out/shimbin/.containerd-shim-runsc-v1.tmp"
mv "$out/shimbin/.containerd-shim-runsc-v1.tmp" "$out/shimbin/containerd-shim-runsc-v1"
echo "$out"

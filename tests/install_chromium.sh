#!/bin/sh
# install_chromium.sh — makes sure a headless browser is there for the `vram viz` browser tests
# (tests/viz_check.py), as CI runs on a fresh machine: Debian's chromium, installed by
# apt_install.sh where it is missing and this user may install packages. Never fails the build:
# where no browser can be installed it says why, and the browser test then reports itself skipped
# with that reason.
for b in "$VRAM_CHROMIUM" chromium chromium-browser google-chrome; do
  if [ -n "$b" ] && command -v "$b" >/dev/null 2>&1; then
    echo "install_chromium: $(command -v "$b") is there"
    exit 0
  fi
done
exec sh "$(dirname "$0")/apt_install.sh" install_chromium "the viz browser tests will be skipped" chromium

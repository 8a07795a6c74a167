#!/bin/sh
# install_chromium.sh — makes sure a headless browser is there for the `vram viz` browser tests
# (tests/viz_check.py), as CI runs on a fresh machine: Debian's chromium, installed with apt-get
# where it is missing and this user may install packages. Never fails the build: where no browser
# can be installed it says why, and the browser test then reports itself skipped with that reason.
for b in "$VRAM_CHROMIUM" chromium chromium-browser google-chrome; do
  if [ -n "$b" ] && command -v "$b" >/dev/null 2>&1; then
    echo "install_chromium: $(command -v "$b") is there"
    exit 0
  fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_chromium: no chromium and no apt-get here: the viz browser tests will be skipped"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  SUDO="sudo -n"
  if ! $SUDO true 2>/dev/null; then
    echo "install_chromium: no chromium, and this user may not install packages: the viz browser tests will be skipped"
    exit 0
  fi
fi
echo "install_chromium: installing Debian's chromium (apt-get)"
export DEBIAN_FRONTEND=noninteractive
if ${SUDO:-} apt-get update -qq >/dev/null 2>&1 && \
   ${SUDO:-} apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; then
  echo "install_chromium: installed $(command -v chromium)"
else
  echo "install_chromium: apt-get could not install chromium: the viz browser tests will be skipped"
fi
exit 0

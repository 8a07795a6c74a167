#!/bin/sh
# apt_install.sh — installs Debian packages a test needs where they are missing, for the test
# fixtures' scripts (install_chromium.sh, install_mpi.sh), as CI runs on a fresh machine.
#   sh tests/apt_install.sh NAME "WHAT IS SKIPPED WITHOUT IT" PACKAGE...
# Never fails: where nothing can be installed (no apt-get, a user who may not install packages,
# apt-get failing) it says why, and the tests that need the packages report themselves skipped.
name=$1 skipped=$2
shift 2
if ! command -v apt-get >/dev/null 2>&1; then
  echo "$name: no apt-get here: $skipped"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  SUDO="sudo -n"
  if ! $SUDO true 2>/dev/null; then
    echo "$name: this user may not install packages: $skipped"
    exit 0
  fi
fi
echo "$name: installing Debian's $* (apt-get)"
export DEBIAN_FRONTEND=noninteractive
if ${SUDO:-} apt-get update -qq >/dev/null 2>&1 && \
   ${SUDO:-} apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; then
  echo "$name: installed $*"
else
  echo "$name: apt-get could not install $*: $skipped"
fi
exit 0

#!/bin/sh
# install_mpi.sh — makes sure Open MPI is there for the data parallel tests (tests/dist_check.py),
# as CI runs on a fresh machine: Debian's openmpi-bin (mpirun, and libmpi.so.40 through libopenmpi3;
# vram needs no MPI headers), installed with apt-get where missing and this user may install
# packages. Never fails the build: where MPI cannot be installed it says why, and dist_check.py
# then reports itself skipped.
if command -v mpirun >/dev/null 2>&1 && \
   { ldconfig -p 2>/dev/null | grep -q 'libmpi\.so\.40' || [ -e /usr/lib/x86_64-linux-gnu/libmpi.so.40 ]; }; then
  echo "install_mpi: $(command -v mpirun) and libmpi.so.40 are there"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_mpi: no Open MPI and no apt-get here: the data parallel tests will be skipped"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  SUDO="sudo -n"
  if ! $SUDO true 2>/dev/null; then
    echo "install_mpi: no Open MPI, and this user may not install packages: the data parallel tests will be skipped"
    exit 0
  fi
fi
echo "install_mpi: installing Debian's openmpi-bin (apt-get)"
export DEBIAN_FRONTEND=noninteractive
if ${SUDO:-} apt-get update -qq >/dev/null 2>&1 && \
   ${SUDO:-} apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null 2>&1; then
  echo "install_mpi: installed $(command -v mpirun)"
else
  echo "install_mpi: apt-get could not install Open MPI: the data parallel tests will be skipped"
fi
exit 0

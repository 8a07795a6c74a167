"""vram_wheel.py — the PEP 517 build backend behind `pip install` of this repository (named in
../../pyproject.toml). It needs nothing from the network and no build package: only the Python
standard library, CMake and a C/C++ compiler, so `pip install .` (or of the sdist) works offline
with pip's default build isolation. (Where no cmake of CMakeLists.txt's minimum version is on
PATH, the build asks its front end for PyPI's cmake package, which an online install fetches;
where PATH's cmake is that package's Python launcher, the package's binary is run: _find_cmake.)

    pip install /path/to/vram                 # a wheel built from the source tree, installed
    pip install -e /path/to/vram              # editable: the repository's python/ and build/
    pip wheel /path/to/vram -w dist/          # the wheel alone
    python -m build --sdist                   # the source archive (any PEP 517 front end)

build_wheel configures and builds the two CMake targets a Python user needs (the `vram` command
and libvram_torch.so) in a scratch folder and zips, with the dist-info files PEP 427 asks for:

    vram_torch/*.py, vram_torch/libvram_torch.so    the package, its library beside it (its first
                                                    place to look)
    vram-V.data/scripts/vram                        → <prefix>/bin/vram (for `vram replay --fit`)
    vram-V.data/data/share/vram/kjv.txt             → <prefix>/share/vram/kjv.txt (the corpus
                                                    `vram train` reads by default)

build_editable (PEP 660) builds in the repository's own build/ (where vram_torch looks for its
library) and installs only a .pth file naming python/ and a `vram` script that runs build/vram,
so edits to the Python files take effect at once; a C change needs `make` (or the same pip
command) again. build_sdist archives the tracked files (git ls-files, else the whole tree less
build folders) under vram-V/ with PKG-INFO.

Settings (pip's -C / --config-settings): build-dir=PATH keeps the CMake build there (and
re-uses it), cmake-args="-DX=Y ..." adds configure arguments (as does $CMAKE_ARGS), jobs=N sets
the build's parallelism. Any other setting is refused by name. The version is the one in
CMakeLists.txt's project(), so a wheel, `vram version` and the CMake package always agree.
"""
import base64
import glob
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

NAME = "vram"
SUMMARY = "GPU memory management for deep learning: a caching allocator for PyTorch and C, and its tools"
SETTINGS = ("build-dir", "cmake-args", "jobs")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CMAKE_MIN = (3, 20)  # CMakeLists.txt's cmake_minimum_required
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # every archive entry's time: the same source gives the same wheel


class BuildError(Exception):
    """A build that cannot go on; its message says what was wrong (pip prints it)."""


def version():
    """The version in CMakeLists.txt's project(vram VERSION x.y.z)."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(\s*vram\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not m:
        raise BuildError("vram_wheel: no project(vram VERSION ...) in %s/CMakeLists.txt" % ROOT)
    return m.group(1)


def _settings(config_settings):
    """The settings as a dict, unknown keys refused."""
    s = dict(config_settings or {})
    unknown = sorted(k for k in s if k not in SETTINGS)
    if unknown:
        raise BuildError("vram_wheel: unknown setting %s (known: %s)" % (", ".join(repr(k) for k in unknown),
                                                                        ", ".join(SETTINGS)))
    for k, v in s.items():
        if not isinstance(v, str):  # pip gives a list when a setting is repeated
            raise BuildError("vram_wheel: setting %r given more than once" % k)
    if "jobs" in s and not re.fullmatch(r"[1-9][0-9]{0,3}", s["jobs"]):
        raise BuildError("vram_wheel: jobs must be a whole number from 1 to 9999, not %r" % s["jobs"])
    return s


def _run(cmd, what):
    """Runs a build command; a failure is a BuildError carrying the end of its output."""
    try:
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        raise BuildError("vram_wheel: cannot run %s (%s): %s" % (cmd[0], what, e)) from None
    if r.returncode != 0:
        tail = "\n".join(r.stdout.splitlines()[-40:])
        raise BuildError("vram_wheel: %s failed (status %d): %s\n%s" % (what, r.returncode, " ".join(cmd), tail))


def _find_cmake():
    """The cmake to run: the one on PATH, or None. Where that is the launcher of PyPI's cmake package
    (a Python script that imports the package), the binary the package ships is used instead: under
    pip's build isolation the launcher cannot import its own package, since the isolation drops the
    environment's site-packages from every Python it starts. A user whose only cmake came from
    `pip install cmake` into the environment they install vram into would meet that."""
    cmake = shutil.which("cmake")
    if not cmake:
        return None
    try:
        with open(cmake, "rb") as f:
            if f.read(2) != b"#!":
                return cmake
    except OSError:
        return cmake
    env_root = os.path.dirname(os.path.dirname(os.path.realpath(cmake)))  # <env>/bin/cmake
    for shipped in sorted(glob.glob(os.path.join(env_root, "lib", "python3*", "site-packages", "cmake", "data",
                                                 "bin", "cmake"))):
        if os.access(shipped, os.X_OK):
            return shipped
    return cmake


def _cmake_build(build_dir, s):
    """Configures (Release unless cmake-args says otherwise) and builds `vram` and libvram_torch.so
    in build_dir; returns the paths of the command, the library and the corpus."""
    cmake = _find_cmake()
    if not cmake:
        raise BuildError("vram_wheel: cmake not found on PATH; vram's wheel is built with CMake (%d.%d or newer: "
                         "install it, or `pip install cmake`)" % CMAKE_MIN)
    args = shlex.split(os.environ.get("CMAKE_ARGS", "")) + shlex.split(s.get("cmake-args", ""))
    if not any(a.startswith("-DCMAKE_BUILD_TYPE=") for a in args):
        args.insert(0, "-DCMAKE_BUILD_TYPE=Release")
    _run([cmake, "-S", ROOT, "-B", build_dir] + args, "configuring")
    jobs = s.get("jobs") or str(os.cpu_count() or 2)
    _run([cmake, "--build", build_dir, "-j", jobs, "--target", "vram", "vram_torch"], "building")
    made = [os.path.join(build_dir, p) for p in ("vram", "libvram_torch.so", os.path.join("data", "kjv.txt"))]
    missing = [p for p in made if not os.path.isfile(p)]
    if missing:
        raise BuildError("vram_wheel: the build did not make %s" % ", ".join(missing))
    return made


def _tag():
    """py3-none-<platform>: libvram_torch.so is loaded through ctypes, not as an extension module,
    so any Python 3 on this platform can use the wheel."""
    return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform())


def _metadata():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: >=3.8\n"
            "Description-Content-Type: text/markdown\n\n%s" % (NAME, version(), SUMMARY, readme))


def _dist_info():
    return "%s-%s.dist-info" % (NAME, version())


def _write_dist_info(folder):
    d = os.path.join(folder, _dist_info())
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


class _Wheel:
    """A wheel being written: add() each file, then close() writes WHEEL and RECORD (or discard()
    deletes it)."""

    def __init__(self, folder, tag):
        self.tag = tag
        self.name = "%s-%s-%s.whl" % (NAME, version(), tag)
        self.path = os.path.join(folder, self.name)
        self.zip = zipfile.ZipFile(self.path, "w", zipfile.ZIP_DEFLATED)
        self.record = []

    def add(self, arcname, data, executable=False):
        info = zipfile.ZipInfo(arcname, ZIP_TIME)
        info.external_attr = (0o100755 if executable else 0o100644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))

    def add_file(self, arcname, path):
        with open(path, "rb") as f:
            self.add(arcname, f.read(), os.access(path, os.X_OK))

    def discard(self):
        """Closes and deletes the unfinished wheel."""
        self.zip.close()
        os.remove(self.path)

    def close(self):
        di = _dist_info()
        self.add(di + "/METADATA", _metadata().encode())
        self.add(di + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: vram_wheel %s\nRoot-Is-Purelib: false\nTag: %s\n"
                                 % (version(), self.tag)).encode())
        self.record.append(di + "/RECORD,,")
        info = zipfile.ZipInfo(di + "/RECORD", ZIP_TIME)
        info.external_attr = 0o100644 << 16
        self.zip.writestr(info, "\n".join(self.record) + "\n", zipfile.ZIP_DEFLATED)
        self.zip.close()
        return self.name


def _package_files():
    """(arcname, path) of every .py file of python/vram_torch, whose __version__ must be CMake's
    (vram_torch refuses a library of another version, so a wheel of two would not load)."""
    top = os.path.join(ROOT, "python")
    with open(os.path.join(top, "vram_torch", "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]*)"', f.read(), re.M)
    if not m or m.group(1) != version():
        raise BuildError("vram_wheel: python/vram_torch/__init__.py's __version__ (%s) is not CMakeLists.txt's (%s)"
                         % (m.group(1) if m else "none", version()))
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(top, "vram_torch")):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                path = os.path.join(dirpath, fn)
                out.append((os.path.relpath(path, top).replace(os.sep, "/"), path))
    return out


# ---- PEP 517 hooks -----------------------------------------------------------------------

def _cmake_requirement():
    """[] where a cmake of at least CMAKE_MIN is on PATH, else the PyPI cmake package: a front end
    with build isolation then installs it (online) before building, and an offline build with a
    cmake of its own needs nothing."""
    cmake = _find_cmake()
    if cmake:
        try:
            out = subprocess.run([cmake, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        m = re.search(r"version (\d+)\.(\d+)", out)
        if m and (int(m.group(1)), int(m.group(2))) >= CMAKE_MIN:
            return []
    return ["cmake>=%d.%d" % CMAKE_MIN]


def get_requires_for_build_wheel(config_settings=None):
    return _cmake_requirement()


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return _cmake_requirement()


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _settings(config_settings)
    return _write_dist_info(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    s = _settings(config_settings)
    package = _package_files()  # (its version checked before anything is built)
    scratch = None if s.get("build-dir") else tempfile.mkdtemp(prefix="vram-wheel-")
    try:
        build_dir = os.path.abspath(s.get("build-dir") or scratch)
        exe, lib, corpus = _cmake_build(build_dir, s)
        data = "%s-%s.data" % (NAME, version())
        w = _Wheel(wheel_directory, _tag())
        try:
            for arcname, path in package:
                w.add_file(arcname, path)
            w.add_file("vram_torch/libvram_torch.so", lib)
            w.add_file(data + "/scripts/vram", exe)
            w.add_file(data + "/data/share/vram/kjv.txt", corpus)
            return w.close()
        except BaseException:
            w.discard()  # no half-written wheel left behind
            raise
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    s = _settings(config_settings)
    _package_files()  # its version checked
    build_dir = os.path.abspath(s.get("build-dir") or os.path.join(ROOT, "build"))
    searched = [os.path.join(ROOT, d) for d in ("build", "b", "build-release")]
    if build_dir not in searched:
        raise BuildError("vram_wheel: an editable install builds in one of %s, where vram_torch looks for its "
                         "library; build-dir=%s is not one of them" % (", ".join(searched), build_dir))
    exe = _cmake_build(build_dir, s)[0]
    w = _Wheel(wheel_directory, _tag())
    w.add("__editable__.%s.pth" % NAME, (os.path.join(ROOT, "python") + "\n").encode())
    w.add("%s-%s.data/scripts/vram" % (NAME, version()),
          ("#!/bin/sh\n# vram, editable: the command of the build in %s\nexec %s \"$@\"\n"
           % (build_dir, shlex.quote(exe))).encode(), executable=True)
    return w.close()


def _source_files():
    """The files an sdist holds, relative to ROOT: git's tracked files where this is a clone,
    else every file but build folders, caches and the git folder."""
    if os.path.exists(os.path.join(ROOT, ".git")) and shutil.which("git"):  # (a worktree's .git is a file)
        r = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            return sorted(p for p in r.stdout.decode().split("\0") if p and os.path.isfile(os.path.join(ROOT, p)))
    out = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT)
        dirnames[:] = sorted(d for d in dirnames if not (d.startswith(("build", ".")) or d in ("b", "__pycache__")
                                                           or (rel == "." and d == "dist")))
        out += [os.path.normpath(os.path.join(rel, fn)) for fn in sorted(filenames) if fn != ".git"]
    return out


def build_sdist(sdist_directory, config_settings=None):
    _settings(config_settings)
    base = "%s-%s" % (NAME, version())
    name = base + ".tar.gz"
    pkg_info = _metadata().encode()

    def normalized(t):
        t.uid = t.gid = 0
        t.uname = t.gname = ""
        t.mtime = 0
        return t

    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = normalized(tarfile.TarInfo(base + "/PKG-INFO"))
        info.size, info.mode = len(pkg_info), 0o644
        tar.addfile(info, io.BytesIO(pkg_info))
        for rel in _source_files():
            if rel != "PKG-INFO":
                tar.add(os.path.join(ROOT, rel), arcname=base + "/" + rel, recursive=False, filter=normalized)
    return name


if __name__ == "__main__":  # python python/backend/vram_wheel.py sdist|wheel DIR: the hooks by hand
    if len(sys.argv) != 3 or sys.argv[1] not in ("sdist", "wheel"):
        sys.exit("usage: vram_wheel.py sdist|wheel OUTPUT_DIR")
    try:
        print((build_sdist if sys.argv[1] == "sdist" else build_wheel)(sys.argv[2]))
    except BuildError as e:
        sys.exit(str(e))

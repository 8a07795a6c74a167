#!/usr/bin/env python3
"""pip_check.py — vram as pip installs it (pyproject.toml, python/backend/vram_wheel.py):
  - the backend's hooks called as a PEP 517 front end calls them: the sdist holds the tracked
    source under vram-V/ with PKG-INFO; a wheel built from that unpacked sdist (no git there) is
    named for its version and platform, its RECORD lists every file with the right hash and
    size, and it is byte for byte the wheel built from the repository in another folder; bad
    settings and a missing cmake are refused with a message naming them; the build asks its
    front end for PyPI's cmake only where no cmake of CMakeLists.txt's minimum is on PATH, and
    where PyPI's cmake is on PATH it runs the package's binary, not its Python launcher;
  - pip itself, where a virtual environment with pip can be made here (offline: --no-index,
    build isolation on, as a user's `pip install` runs): the wheel installed gives a working
    `vram` (version, a replay, a short train on the corpus installed beside it) and a vram_torch
    that loads its own libvram_torch.so; uninstalling removes them all; the sdist installs
    straight through pip; an editable install imports the unpacked tree's python/ (an edit shows
    at once) and runs its build/vram.

The backend builds in its own folders, never in this test's CMake build, so the sanitizer build
skips this test (77) and the plain build runs it.

usage: pip_check.py SOURCE_DIR VERSION TRACE
"""
import base64
import hashlib
import os
import re
import shutil
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pycheck import check, check_installed_vram, done, run, script_args  # noqa: E402


def hook(tree, call, env=None):
    """Runs `vram_wheel.<call>` from the backend in tree, in a fresh interpreter (as front ends
    do), with tree as the working folder; returns the CompletedProcess."""
    code = ("import sys; sys.path.insert(0, 'python/backend'); import vram_wheel as w\n"
            "try:\n    print(w.%s)\nexcept w.BuildError as e:\n    sys.exit(str(e))\n" % call)
    return run([sys.executable, "-c", code], cwd=tree, env=env, timeout=600)


def check_wheel(path, version):
    """Checks a built wheel's name, layout and RECORD; returns its file names."""
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    check(os.path.basename(path) == f"vram-{version}-py3-none-{plat}.whl", f"the wheel's name: {os.path.basename(path)}")
    z = zipfile.ZipFile(path)
    names = z.namelist()
    di, data = f"vram-{version}.dist-info", f"vram-{version}.data"
    for want in ["vram_torch/__init__.py", "vram_torch/record.py", "vram_torch/libvram_torch.so",
                 f"{data}/scripts/vram", f"{data}/data/share/vram/kjv.txt",
                 f"{di}/METADATA", f"{di}/WHEEL", f"{di}/RECORD"]:
        check(want in names, f"the wheel holds {want}")
    check(not any("__pycache__" in n or n.startswith(("src/", "build")) for n in names), "nothing else in the wheel")
    mode = z.getinfo(f"{data}/scripts/vram").external_attr >> 16
    check(mode & 0o111 == 0o111, f"the vram command is executable in the wheel ({oct(mode)})")
    wheel = z.read(f"{di}/WHEEL").decode()
    check(f"Tag: py3-none-{plat}" in wheel and "Root-Is-Purelib: false" in wheel, f"WHEEL: {wheel!r}")
    meta = z.read(f"{di}/METADATA").decode()
    check(meta.startswith("Metadata-Version: 2.1\nName: vram\nVersion: %s\n" % version), f"METADATA: {meta[:120]!r}")
    rows = [line.split(",") for line in z.read(f"{di}/RECORD").decode().splitlines()]
    listed = {r[0] for r in rows}
    check(listed == set(names), f"RECORD lists every file and no other ({sorted(listed ^ set(names))})")
    bad = []
    for name, digest, size in rows:
        if name == f"{di}/RECORD":
            if digest or size:
                bad.append(name)
            continue
        blob = z.read(name)
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).rstrip(b"=").decode()
        if digest != want or size != str(len(blob)):
            bad.append(name)
    check(not bad, f"RECORD's hashes and sizes match the files ({bad})")
    return names


def main():
    source, version, trace = script_args(
        3, __doc__, unsanitized="the wheel is built in its own folders, not in this build; the plain build runs this")
    tmp = tempfile.mkdtemp(prefix="vram-pip-")
    dist = os.path.join(tmp, "dist")
    os.makedirs(dist)

    # ---- the hooks, as a front end calls them
    r = hook(source, "build_sdist(%r)" % dist)
    sdist = os.path.join(dist, r.stdout.strip())
    check(r.returncode == 0 and r.stdout.strip() == f"vram-{version}.tar.gz" and os.path.isfile(sdist),
          f"build_sdist makes vram-{version}.tar.gz: {r.stdout.strip()} {r.stderr.strip()[-300:]}")
    if not os.path.isfile(sdist):
        shutil.rmtree(tmp, ignore_errors=True)
        sys.exit(done("pip_check"))
    with tarfile.open(sdist) as tar:
        members = tar.getnames()
        top = f"vram-{version}/"
        check(all(m.startswith(top) for m in members), "every sdist member is under vram-V/")
        for want in ["PKG-INFO", "pyproject.toml", "CMakeLists.txt", "python/backend/vram_wheel.py",
                     "python/vram_torch/__init__.py", "src/memory/allocator.c", "include/vram/alloc.h", "README.md"]:
            check(top + want in members, f"the sdist holds {want}")
        check(not any(re.match(r"[^/]+/(build[^/]*|b|\.git)/", m) for m in members), "no build folder or .git in the sdist")
        tar.extractall(tmp, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))  # (3.12+ asks)
    tree = os.path.join(tmp, f"vram-{version}")
    check(not os.path.exists(os.path.join(tree, ".git")), "the unpacked sdist is not a git clone")

    # a wheel from the unpacked sdist, built in its build/ (which the editable install below re-uses)
    r = hook(tree, "build_wheel(%r, {'build-dir': 'build', 'jobs': '2'})" % dist)
    wheel = os.path.join(dist, r.stdout.strip())
    check(r.returncode == 0 and os.path.isfile(wheel), f"build_wheel from the sdist: {r.stdout.strip()} {r.stderr.strip()[-400:]}")
    if os.path.isfile(wheel):
        check_wheel(wheel, version)
    # the same source gives the same wheel, byte for byte: built again from the repository itself,
    # in a scratch folder of the backend's choosing
    again = os.path.join(tmp, "again")
    os.makedirs(again)
    r = hook(source, "build_wheel(%r, {'jobs': '2'})" % again)
    second = os.path.join(again, r.stdout.strip())
    if check(r.returncode == 0 and os.path.isfile(second), f"build_wheel from the repository: {r.stderr.strip()[-300:]}") \
            and os.path.isfile(wheel):
        with open(wheel, "rb") as f1, open(second, "rb") as f2:
            check(f1.read() == f2.read(), "the wheels from the sdist and from the repository are the same bytes")
    r = hook(tree, "prepare_metadata_for_build_wheel(%r)" % tmp)
    check(r.returncode == 0 and r.stdout.strip() == f"vram-{version}.dist-info"
          and os.path.isfile(os.path.join(tmp, r.stdout.strip(), "METADATA")), f"prepare_metadata: {r.stdout.strip()}")

    # bad settings, and no cmake: refused before any build, with the reason
    for call, says in [("build_wheel(%r, {'biuld-dir': 'x'})" % dist, "unknown setting 'biuld-dir'"),
                       ("build_wheel(%r, {'jobs': '0'})" % dist, "jobs must be a whole number"),
                       ("build_wheel(%r, {'jobs': ['1', '2']})" % dist, "'jobs' given more than once"),
                       ("build_editable(%r, {'build-dir': %r})" % (dist, tmp), "an editable install builds in one of")]:
        r = hook(tree, call)
        check(r.returncode != 0 and says in r.stderr and "Traceback" not in r.stderr,
              f"{call.split('(')[0]} refuses a bad setting: {r.stderr.strip()[-200:]}")
    # a package whose __version__ is not CMake's: refused before anything is built, no wheel left
    init = os.path.join(tree, "python", "vram_torch", "__init__.py")
    with open(init) as f:
        text = f.read()
    with open(init, "w") as f:
        f.write(text.replace(f'__version__ = "{version}"', '__version__ = "0.0.1"'))
    before = set(os.listdir(dist))
    r = hook(tree, "build_wheel(%r, {'build-dir': %r})" % (dist, os.path.join(tmp, "never")))
    check(r.returncode != 0 and f"__version__ (0.0.1) is not CMakeLists.txt's ({version})" in r.stderr
          and set(os.listdir(dist)) == before and not os.path.exists(os.path.join(tmp, "never")),
          f"a package of another version is refused before building: {r.stderr.strip()[-200:]}")
    with open(init, "w") as f:
        f.write(text)
    # PATH an empty folder: not this python's bin/, which may hold PyPI's cmake (a venv's)
    nopath = os.path.join(tmp, "empty-path")
    os.makedirs(nopath)
    nocmake = dict(os.environ, PATH=nopath)
    r = hook(tree, "build_wheel(%r, {'build-dir': %r})" % (dist, os.path.join(tmp, "never")), env=nocmake)
    check(r.returncode != 0 and "cmake not found on PATH" in r.stderr, f"no cmake: {r.stderr.strip()[-200:]}")
    # what the build asks its front end to install first: nothing where cmake is here, PyPI's
    # cmake where it is not (or too old: a stand-in cmake that says 3.10)
    with open(os.path.join(source, "CMakeLists.txt")) as f:
        minimum = re.search(r"cmake_minimum_required\(VERSION (\d+\.\d+)", f.read()).group(1)
    pypi_cmake = f"['cmake>={minimum}']"
    r = hook(tree, "get_requires_for_build_wheel()")
    check(r.returncode == 0 and r.stdout.strip() == "[]", f"with cmake, the build requires nothing: {r.stdout.strip()}")
    r = hook(tree, "get_requires_for_build_editable()", env=nocmake)
    check(r.returncode == 0 and r.stdout.strip() == pypi_cmake, f"without, PyPI's cmake: {r.stdout.strip()}")
    old = os.path.join(tmp, "oldcmake")
    os.makedirs(old)
    with open(os.path.join(old, "cmake"), "w") as f:
        f.write("#!/bin/sh\necho 'cmake version 3.10.2'\n")
    os.chmod(os.path.join(old, "cmake"), 0o755)
    r = hook(tree, "get_requires_for_build_wheel()", env=dict(os.environ, PATH=old + os.pathsep + os.environ["PATH"]))
    check(r.returncode == 0 and r.stdout.strip() == pypi_cmake, f"a cmake too old, PyPI's cmake: {r.stdout.strip()}")
    # PyPI's cmake installed into an environment: bin/cmake a Python launcher (here one that cannot
    # run, as under pip's build isolation, which hides the package from it) and the package's own
    # binary (here a stand-in that runs this machine's cmake): the binary is used, nothing required
    pypi_env = os.path.join(tmp, "pypi-cmake-env")
    shipped = os.path.join(pypi_env, "lib", "python3.99", "site-packages", "cmake", "data", "bin", "cmake")
    os.makedirs(os.path.dirname(shipped))
    os.makedirs(os.path.join(pypi_env, "bin"))
    for path, text in ((os.path.join(pypi_env, "bin", "cmake"), "#!/nonexistent/python\nimport cmake\n"),
                       (shipped, '#!/bin/sh\nexec %s "$@"\n' % shutil.which("cmake"))):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
    launcher_only = dict(os.environ, PATH=os.path.join(pypi_env, "bin"))
    r = hook(tree, "_find_cmake()", env=launcher_only)
    check(r.returncode == 0 and r.stdout.strip() == shipped, f"PyPI's cmake: its binary, not its launcher: {r.stdout.strip()}")
    r = hook(tree, "get_requires_for_build_wheel()", env=launcher_only)
    check(r.returncode == 0 and r.stdout.strip() == "[]", f"PyPI's cmake: nothing more required: {r.stdout.strip()}")

    # ---- pip itself, offline, in a virtual environment
    venv = os.path.join(tmp, "venv")
    r = run([sys.executable, "-m", "venv", venv])
    py, bindir = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin")
    if r.returncode != 0 or run([py, "-m", "pip", "--version"]).returncode != 0:
        print("note: no venv with pip here (%s); pip's own install is not checked" % r.stderr.strip()[-200:])
        shutil.rmtree(tmp, ignore_errors=True)
        sys.exit(done("pip_check"))
    env = {k: v for k, v in os.environ.items() if k not in ("VRAM_TORCH_LIBRARY", "PYTHONPATH")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    pip = [py, "-m", "pip"]
    site = run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], env=env).stdout.strip()
    installed = [os.path.join(bindir, "vram"), os.path.join(venv, "share", "vram", "kjv.txt"),
                 os.path.join(site, "vram_torch", "libvram_torch.so"), os.path.join(site, "vram_torch", "__init__.py")]
    probe = ("import ctypes, vram_torch; p = vram_torch.library_path(); print(vram_torch.__file__); print(p); "
             "assert ctypes.CDLL(p).vram_torch_alloc and vram_torch.__version__ == %r" % version)

    if os.path.isfile(wheel):
        r = run(pip + ["install", "--no-index", "--no-cache-dir", wheel], env=env, cwd=tmp)
        check(r.returncode == 0, f"pip installs the wheel ({r.stderr.strip()[-300:]})")
        for path in installed:
            check(os.path.isfile(path), f"pip installed {os.path.relpath(path, venv)}")
        check_installed_vram("pip install", os.path.join(bindir, "vram"), version, trace, tmp)
        r = run([py, "-c", probe], cwd=tmp, env=env)
        lines = r.stdout.split()
        check(r.returncode == 0 and len(lines) == 2 and lines[0].startswith(os.path.join(site, "vram_torch"))
              and lines[1] == installed[2], f"vram_torch loads its own library: {r.stdout.strip()} {r.stderr.strip()[-200:]}")
        r = run([py, "-m", "vram_torch", "--version"], cwd=tmp, env=env)
        check(r.returncode == 0 and r.stdout.splitlines()[1:] == [f"libvram_torch.so {version} ({installed[2]})"],
              f"python -m vram_torch --version names the installed library: {r.stdout.strip()} {r.stderr.strip()[-200:]}")
        r = run(pip + ["show", "vram"], env=env)
        check(r.returncode == 0 and f"Version: {version}" in r.stdout, f"pip show vram: {r.stdout.strip()[:200]}")
        r = run(pip + ["uninstall", "-y", "vram"], env=env)
        left = [p for p in installed if os.path.exists(p)] + \
               [d for d in (os.path.join(site, "vram_torch"),) if os.path.exists(d)]
        check(r.returncode == 0 and not left, f"pip uninstall removes everything it installed (left: {left})")

    # the sdist straight through pip: build isolation, nothing fetched
    r = run(pip + ["install", "--no-index", "--no-cache-dir", sdist], env=env, cwd=tmp, timeout=600)
    check(r.returncode == 0, f"pip installs the sdist ({r.stderr.strip()[-400:]})")
    r = run([os.path.join(bindir, "vram"), "version"], cwd=tmp)
    check(r.returncode == 0 and r.stdout.strip() == f"vram {version}", f"vram from the sdist: {r.stdout.strip()!r}")
    r = run([py, "-c", probe], cwd=tmp, env=env)
    check(r.returncode == 0 and r.stdout.split()[1:] == [installed[2]], f"vram_torch from the sdist: {r.stdout.strip()}")
    run(pip + ["uninstall", "-y", "vram"], env=env)

    # editable: the tree's python/ on the path, its build/ the library and the command
    r = run(pip + ["install", "--no-index", "--no-cache-dir", "-e", tree], env=env, cwd=tmp, timeout=600)
    check(r.returncode == 0, f"pip install -e ({r.stderr.strip()[-400:]})")
    with open(os.path.join(tree, "python", "vram_torch", "__init__.py"), "a") as f:
        f.write("\nEDITED_IN_PLACE = 1\n")
    r = run([py, "-c", probe + "; print(vram_torch.EDITED_IN_PLACE)"], cwd=tmp, env=env)
    lines = r.stdout.split()
    check(r.returncode == 0 and len(lines) == 3 and lines[0].startswith(os.path.join(tree, "python", "vram_torch"))
          and lines[1] == os.path.join(tree, "build", "libvram_torch.so") and lines[2] == "1",
          f"the editable vram_torch is the tree's, edits show at once: {r.stdout.strip()} {r.stderr.strip()[-200:]}")
    r = run([os.path.join(bindir, "vram"), "version"], cwd=tmp)
    check(r.returncode == 0 and r.stdout.strip() == f"vram {version}", f"the editable vram command: {r.stdout.strip()!r}")
    r = run(pip + ["uninstall", "-y", "vram"], env=env)
    r2 = run([py, "-c", "import vram_torch"], cwd=tmp, env=env)
    check(r.returncode == 0 and r2.returncode != 0 and not os.path.exists(os.path.join(bindir, "vram")),
          "pip uninstall ends the editable install")
    shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(done("pip_check"))


if __name__ == "__main__":
    main()

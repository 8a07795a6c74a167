#!/usr/bin/env python3
"""install_check.py — `cmake --install` of a finished build, used the ways an installed vram is used:
  - the files cmake/install.cmake promises, under a --prefix given only at install time;
  - the installed `vram` alone: its version, a replay of a bundled trace, and a short `vram train`
    on the corpus installed beside it (no --data);
  - every installed header compiles on its own, as strict C11 (-std=c11 -Wpedantic -Werror: no
    GNU extensions or feature macros assumed) and, where a C++ compiler is found, as C++17;
  - a C program built against the installed library three ways (find_package(vram) with
    vram::vram and with vram::vram_static, and the flags of the installed vram.pc, read here as
    pkg-config reads it, and through pkg-config itself where it is installed), each of which opens
    the simulated device, allocates, checks the statistics and frees;
  - the installed vram_torch package, imported from outside the repository with no
    VRAM_TORCH_LIBRARY, finds the libvram_torch.so installed inside it; installed into a virtual
    environment (where the venv module exists), that environment's python imports it with no
    PYTHONPATH.

usage: install_check.py BUILD_DIR C_COMPILER VERSION LIBDIR PYTHONDIR TRACE   (LIBDIR, PYTHONDIR: relative to the prefix)
"""
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pycheck import check, check_installed_vram, done, run, script_args  # noqa: E402

CONSUMER = r"""
#include <stdio.h>
#include "vram/alloc.h"
#include "vram/stats.h"

int main(void) {
    vram_device *dev = NULL;
    vram_allocator *a = NULL;
    void *p = NULL;
    if (vram_device_open("sim:1GiB", &dev) != VRAM_OK || vram_allocator_new(dev, NULL, &a) != VRAM_OK) {
        fprintf(stderr, "open: %s\n", vram_last_error());
        return 1;
    }
    if (vram_allocator_malloc(a, 3u << 20, 0, VRAM_TAG_ACTIVATION, &p) != VRAM_OK) return 2;
    vram_stats st;
    vram_allocator_get_stats(a, &st);
    uint64_t live = st.allocated_bytes[0].current;
    vram_allocator_free(a, p);
    vram_allocator_get_stats(a, &st);
    printf("allocated %llu then %llu\n", (unsigned long long)live, (unsigned long long)st.allocated_bytes[0].current);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return live == (3u << 20) && st.allocated_bytes[0].current == 0 ? 0 : 3;
}
"""

CMAKE_CONSUMER = """cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(vram 0.1 CONFIG REQUIRED)
add_executable(with_shared consumer.c)
target_link_libraries(with_shared PRIVATE vram::vram)
add_executable(with_static consumer.c)
target_link_libraries(with_static PRIVATE vram::vram_static)
"""


RUNTIME_CONSUMER = r"""
#include <stdio.h>
#include "vram/tensor.h"
int main(void) {
    vram_device *dev;
    vram_allocator *a;
    vram_runtime *rt;
    if (vram_device_open("host:64MiB", &dev) != VRAM_OK || vram_allocator_new(dev, NULL, &a) != VRAM_OK ||
        vram_runtime_new(a, 1, &rt) != VRAM_OK)
        return 1;
    printf("runtime on %s\n", vram_runtime_device_name(rt));
    vram_runtime_free(rt);
    vram_allocator_destroy(a);
    vram_device_close(dev);
    return 0;
}
"""


def pc_fields(path):
    """Cflags, Libs and Libs.private of a .pc file, its variables expanded as pkg-config does
    (${pcfiledir} is the file's folder)."""
    vars_ = {"pcfiledir": os.path.dirname(path)}
    fields = {}
    expand = lambda v: re.sub(r"\$\{(\w+)\}", lambda m: vars_[m.group(1)], v)
    for line in open(path):
        line = line.strip()
        if m := re.match(r"^(\w+)=(.*)$", line):
            vars_[m.group(1)] = expand(m.group(2))
        elif m := re.match(r"^([\w.]+):\s*(.*)$", line):
            fields[m.group(1)] = expand(m.group(2))
    return fields


def main():
    build, cc, version, libdir, pythondir, trace = script_args(
        6, __doc__, unsanitized="programs built against the sanitizer build's library need the sanitizers' "
                                "runtimes; the plain build runs this")
    tmp = tempfile.mkdtemp(prefix="vram-install-")
    prefix = os.path.join(tmp, "prefix")
    r = run(["cmake", "--install", build, "--prefix", prefix])
    check(r.returncode == 0, f"cmake --install exits 0 ({r.stderr.strip()[-300:]})")
    for rel in ["bin/vram", "share/vram/kjv.txt", "include/vram/alloc.h", "include/vram/stats.h", "include/vram/vram.h",
                f"{libdir}/libvram.so", f"{libdir}/libvram.so.0", f"{libdir}/libvram.so.{version}",
                f"{libdir}/pkgconfig/vram.pc", f"{libdir}/cmake/vram/vramConfig.cmake",
                f"{libdir}/libvram_runtime.so.0", f"{libdir}/libvram_runtime.a", f"{libdir}/libvram_smi.so.0",
                f"{libdir}/libvram_smi.a", f"{libdir}/pkgconfig/vram-runtime.pc", f"{libdir}/pkgconfig/vram-smi.pc",
                f"{libdir}/cmake/vram/vramConfigVersion.cmake", f"{libdir}/cmake/vram/vramTargets.cmake",
                f"{pythondir}/vram_torch/__init__.py", f"{pythondir}/vram_torch/record.py",
                f"{pythondir}/vram_torch/libvram_torch.so"]:
        check(os.path.exists(os.path.join(prefix, rel)), f"installed: {rel}")
    check(not any("__pycache__" in d for d, _, _ in os.walk(prefix)), "no __pycache__ installed")

    # the installed command, run from elsewhere
    check_installed_vram("cmake --install", os.path.join(prefix, "bin", "vram"), version, trace, tmp)

    # each installed header alone, strict C11 and C++17
    incdir = os.path.join(prefix, "include")
    headers = sorted(os.listdir(os.path.join(incdir, "vram")))
    cxx = shutil.which("c++") or shutil.which("g++")
    for h in headers:
        unit = os.path.join(tmp, "header.c")
        with open(unit, "w") as f:
            f.write(f'#include "vram/{h}"\n')
        r = run([cc, "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-fsyntax-only", f"-I{incdir}", unit])
        check(r.returncode == 0, f"vram/{h} compiles alone as C11 ({r.stderr.strip()[:300]})")
        if cxx:
            r = run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-x", "c++", f"-I{incdir}", unit])
            check(r.returncode == 0, f"vram/{h} compiles alone as C++17 ({r.stderr.strip()[:300]})")

    # a C program against the installed library
    src = os.path.join(tmp, "consumer")
    os.makedirs(src)
    with open(os.path.join(src, "consumer.c"), "w") as f:
        f.write(CONSUMER)
    with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
        f.write(CMAKE_CONSUMER)
    cbuild = os.path.join(tmp, "consumer-build")
    r = run(["cmake", "-S", src, "-B", cbuild, f"-DCMAKE_PREFIX_PATH={prefix}", f"-DCMAKE_C_COMPILER={cc}"])
    check(r.returncode == 0, f"find_package(vram) configures ({(r.stderr or r.stdout).strip()[-400:]})")
    r = run(["cmake", "--build", cbuild])
    check(r.returncode == 0, f"the find_package consumer builds ({(r.stderr or r.stdout).strip()[-400:]})")
    for exe in ("with_shared", "with_static"):
        r = run([os.path.join(cbuild, exe)])
        check(r.returncode == 0 and "allocated 3145728 then 0" in r.stdout,
              f"{exe} (vram::{'vram' if exe == 'with_shared' else 'vram_static'}) runs: {r.stdout.strip()} {r.stderr.strip()}")
    shared = run(["ldd", os.path.join(cbuild, "with_shared")]).stdout
    check(os.path.join(prefix, libdir, "libvram.so.0") in shared, "with_shared loads the installed libvram.so.0")

    pc = pc_fields(os.path.join(prefix, libdir, "pkgconfig", "vram.pc"))
    check(pc.get("Version") == version, f"vram.pc: Version {pc.get('Version')}")
    flags = [pc.get("Cflags", ""), pc.get("Libs", ""), pc.get("Libs.private", "")]
    exe = os.path.join(tmp, "with_pc")
    r = run([cc, os.path.join(src, "consumer.c"), "-o", exe, *" ".join(flags).split()])
    check(r.returncode == 0, f"cc with vram.pc's flags ({' '.join(flags)}) builds ({r.stderr.strip()[-300:]})")
    # found at run time with nothing more: vram.pc's Libs carry the installed folder as an rpath
    # (a prefix such as ~/.local is not on the loader's path: it failed with "libvram.so.0: cannot
    # open shared object file")
    bare = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    r = run([exe], env=bare)
    check(r.returncode == 0 and "then 0" in r.stdout,
          f"with vram.pc's flags alone it runs, no LD_LIBRARY_PATH: {r.stdout.strip()} {r.stderr.strip()}")
    if shutil.which("pkg-config"):
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, libdir, "pkgconfig"))
        r = run(["pkg-config", "--cflags", "--libs", "vram"], env=env)
        ours = os.path.normpath(os.path.join(prefix, "include"))
        check(r.returncode == 0 and "-lvram" in r.stdout and any(os.path.normpath(t[2:]) == ours
                                                                  for t in r.stdout.split() if t.startswith("-I")),
              f"pkg-config --cflags --libs vram: {r.stdout.strip()} {r.stderr.strip()}")
        # the runtime's own library, which needs libvram's: both found at run time from the .pc alone
        rt = os.path.join(tmp, "runtime.c")
        with open(rt, "w") as f:
            f.write(RUNTIME_CONSUMER)
        r = run(["sh", "-c", f'{cc} {rt} -o {exe}-rt $(pkg-config --cflags --libs vram-runtime) && {exe}-rt'],
                env={**bare, "PKG_CONFIG_PATH": env["PKG_CONFIG_PATH"]})
        check(r.returncode == 0 and "runtime on " in r.stdout,
              f"a runtime program built with vram-runtime.pc runs: {r.stdout.strip()} {r.stderr.strip()[-300:]}")
        # the README's way: cc prog.c $(pkg-config --cflags --libs vram), then run it
        r = run(["sh", "-c", f'{cc} {os.path.join(src, "consumer.c")} -o {exe}-pkg $(pkg-config --cflags --libs vram)'
                 f' && {exe}-pkg'], env={**bare, "PKG_CONFIG_PATH": env["PKG_CONFIG_PATH"]})
        check(r.returncode == 0 and "then 0" in r.stdout,
              f"built with pkg-config's flags, it runs: {r.stdout.strip()} {r.stderr.strip()[-300:]}")
    else:
        print("note: no pkg-config here; vram.pc was read by this script instead")

    # the installed Python package, from outside the repository
    env = {k: v for k, v in os.environ.items() if k not in ("VRAM_TORCH_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = os.path.join(prefix, pythondir)
    probe = ("import ctypes, vram_torch; p = vram_torch.library_path(); "
             "print(vram_torch.__file__); print(p); ctypes.CDLL(p).vram_torch_alloc")
    r = run([sys.executable, "-c", probe], cwd=tmp, env=env)
    lines = r.stdout.split()
    pkg = os.path.join(prefix, pythondir, "vram_torch")
    check(r.returncode == 0 and len(lines) == 2 and lines[0].startswith(pkg) and lines[1] == os.path.join(pkg, "libvram_torch.so"),
          f"the installed vram_torch loads its own libvram_torch.so: {r.stdout.strip()} {r.stderr.strip()[-300:]}")

    # a virtual environment as the prefix: the package lands on its path, no PYTHONPATH needed
    venv = os.path.join(tmp, "venv")
    if run([sys.executable, "-m", "venv", "--without-pip", venv]).returncode != 0:
        print("note: no venv module here; the install into a virtual environment is not checked")
    else:
        r = run(["cmake", "--install", build, "--prefix", venv])
        py = os.path.join(venv, "bin", "python")
        env.pop("PYTHONPATH")
        r = run([py, "-c", "import vram_torch; print(vram_torch.library_path())"], cwd=tmp, env=env)
        check(r.returncode == 0 and r.stdout.strip().startswith(venv + os.sep),
              f"installed into a venv, its python imports vram_torch with no PYTHONPATH: {r.stdout.strip()} "
              f"{r.stderr.strip()[-200:]}")
    shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(done("install_check"))


if __name__ == "__main__":
    main()

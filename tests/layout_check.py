#!/usr/bin/env python3
"""layout_check.py — the build's and the tree's layout rules (issue 40, section 3), checked (CTest).

- no two source files (.c .cpp .cu .h .py .sh) share a name anywhere in src/, include/, tests/,
  bench/ (its results/ hold records, not sources) or python/;
- src/trace holds traces only: benchmark code lives in src/bench;
- each library holds its own layer and no other: libvram.a the allocator, backends, statistics,
  traces and benchmarks; libvram_runtime.a the runtime; libvram_smi.a the NVML monitor;
- libvram_torch.so carries only what the plug-in uses: none of the runtime, the NVML monitor,
  the trace reader or the gzip decoder (it carried all four when libvram's objects went in whole);
- .clang-format and .editorconfig are checked in, with the tree's settings.

usage: layout_check.py SOURCE_DIR BUILD_DIR
"""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done, run, script_args  # noqa: E402

SRC, BUILD = script_args(2, __doc__)
SOURCE_EXT = (".c", ".cpp", ".cu", ".h", ".py", ".sh")


def unique_names():
    seen = {}
    for top in ("src", "include", "tests", "bench", "python"):
        for folder, dirs, files in os.walk(os.path.join(SRC, top)):
            dirs[:] = [d for d in dirs if not (top == "bench" and d == "results") and d != "__pycache__"]
            for f in files:
                if f.endswith(SOURCE_EXT):
                    seen.setdefault(f, []).append(os.path.relpath(os.path.join(folder, f), SRC))
    twice = {name: paths for name, paths in seen.items() if len(paths) > 1}
    check(not twice, f"no two source files share a name: {twice}")
    check(seen, "source files found")


def trace_folder():
    names = os.listdir(os.path.join(SRC, "src", "trace"))
    check(not [n for n in names if "bench" in n or n == "machine.c"], f"no benchmark code in src/trace: {names}")


def archive_members(lib):
    r = run(["ar", "t", os.path.join(BUILD, lib)])
    return set(r.stdout.split()) if r.returncode == 0 else None


def library_contents():
    if not shutil.which("ar") or not shutil.which("nm"):
        print("note: no binutils here; the libraries' contents are not checked")
        return
    layers = {"libvram.a": ("core", "backends", "memory", "trace", "bench"), "libvram_runtime.a": ("runtime",),
              "libvram_smi.a": ("smi",)}
    for lib, folders in layers.items():
        members = archive_members(lib)
        want = {f + ".o" for d in folders for f in os.listdir(os.path.join(SRC, "src", d)) if f.endswith(".c")}
        # and the sources the build generates for it (the runtime's GPU kernels as a C array)
        want |= {m for m in members or () if m.endswith(".c.o") and os.path.exists(os.path.join(BUILD, m[:-2]))
                 and lib == "libvram_runtime.a"}
        check(members is not None and members == want, f"{lib} holds {folders} and nothing else: "
              f"extra {sorted((members or set()) - want)}, missing {sorted(want - (members or set()))}")
    plugin = os.path.join(BUILD, "libvram_torch.so")
    r = run(["nm", plugin])
    syms = r.stdout.lower()
    if check(r.returncode == 0 and "vram_torch_alloc" in syms and "vram_allocator_malloc" in syms,
             f"libvram_torch.so's symbols read: {r.stderr[-200:]}"):
        for word in ("vram_tensor_", "vram_gpt_", "vram_optimizer_", "nvml", "vram_smi_", "vram_trace_load",
                     "gunzip", "inflate", "vram_bench_"):
            check(word not in syms, f"libvram_torch.so carries nothing of {word}")


def format_files():
    path = os.path.join(SRC, ".clang-format")
    text = open(path).read() if os.path.exists(path) else ""
    check("ColumnLimit: 120" in text and "IndentWidth: 4" in text, ".clang-format: 4-space indent, 120 columns")
    path = os.path.join(SRC, ".editorconfig")
    text = open(path).read() if os.path.exists(path) else ""
    check("root = true" in text and "indent_size = 4" in text and "trim_trailing_whitespace = true" in text,
          ".editorconfig: root, 4-space indent, no trailing blanks")


unique_names()
trace_folder()
library_contents()
format_files()
sys.exit(done("layout_check"))

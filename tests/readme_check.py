#!/usr/bin/env python3
"""readme_check.py — the README's code as a newcomer would use it (CTest).

- every ```c block is a whole program: compiled against the built libvram.a and run (status 0);
- every ```sh block parses (bash -n); each `make TARGET` it shows is a target of the Makefile
  (make -n); a block made only of the install-and-build-a-C-program commands (cmake --install,
  export, cc, the program) is run as written, with HOME a fresh folder (so ~/.local is one),
  `build` this build and app.c the README's C program;
- every ```python block compiles;
- every `vram COMMAND --flag` the README names is a command whose --help lists that flag;
- every relative link points at a file or folder that exists.

usage: readme_check.py SOURCE_DIR BUILD_DIR VRAM_BINARY STATIC_LIBRARY CC LINK_FLAGS
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, done, run, script_args  # noqa: E402

SRC, BUILD, VRAM, STATIC, CC, LINK = script_args(
    6, __doc__, unsanitized="the README's program is built the README's way, without the sanitizers' runtimes")
BUILD, VRAM, STATIC = (os.path.abspath(x) for x in (BUILD, VRAM, STATIC))
README = open(os.path.join(SRC, "README.md")).read()
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```$", README, re.M | re.S)
RUNNABLE = ("cmake --install ", "export ", "cc ")


def c_blocks(tmp):
    blocks = [b for lang, b in BLOCKS if lang == "c"]
    check(blocks, "the README has a C example")
    for i, code in enumerate(blocks):
        path = os.path.join(tmp, f"readme_{i}.c")
        with open(path, "w") as f:
            f.write(code)
        exe = path[:-2]
        r = run([CC, "-std=c11", "-Wall", "-Wextra", "-Werror", path, "-I" + os.path.join(SRC, "include"), STATIC,
                 *LINK.split(), "-o", exe])
        if check(r.returncode == 0, f"C block {i} compiles: {r.stderr[-600:]}"):
            r = run([exe])
            check(r.returncode == 0, f"C block {i} runs: status {r.returncode} {r.stderr[-300:]}")
    return blocks[0] if blocks else ""


def sh_blocks(tmp, program):
    blocks = [b for lang, b in BLOCKS if lang == "sh"]
    check(blocks, "the README has shell blocks")
    targets = []
    for i, code in enumerate(blocks):
        r = run(["bash", "-n", "-c", code])
        check(r.returncode == 0, f"shell block {i} parses: {r.stderr}")
        commands = [line.split("#")[0].strip() for line in code.splitlines()]
        commands = [c for c in commands if c]
        targets += [c.split()[1] for c in commands if c.startswith("make ") and len(c.split()) > 1]
        if commands and all(c.startswith(RUNNABLE) for c in commands):
            home = os.path.join(tmp, f"home{i}")
            os.makedirs(home)
            work = os.path.join(tmp, f"work{i}")
            os.makedirs(work)
            os.symlink(BUILD, os.path.join(work, "build"))
            with open(os.path.join(work, "app.c"), "w") as f:
                f.write(program)
            env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PKG_CONFIG_PATH")}
            env["HOME"] = home
            r = run(["bash", "-e", "-c", code], cwd=work, env=env)
            check(r.returncode == 0, f"shell block {i} runs as written: {r.stdout[-300:]} {r.stderr[-600:]}")
    check("run" in targets and "test" in targets, f"the README shows make run and make test: {targets}")
    for t in targets:
        r = run(["make", "-n", "-f", os.path.join(SRC, "Makefile"), t], cwd=SRC)
        check(r.returncode == 0, f"make {t} is a target of the Makefile: {r.stderr[-300:]}")


def python_blocks():
    for i, code in enumerate(b for lang, b in BLOCKS if lang == "python"):
        try:
            compile(code, f"README python block {i}", "exec")
            check(True, "")
        except SyntaxError as e:
            check(False, f"python block {i} compiles: {e}")


def commands_and_flags():
    helps = {}
    for cmd, rest in re.findall(r"`vram ([a-z]\w*)([^`]*)`", README):
        if cmd not in helps:
            r = run([VRAM, cmd, "--help"])
            helps[cmd] = r.stdout if r.returncode == 0 else None
        check(helps[cmd] is not None, f"vram {cmd} is a command")
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", rest):
            check(helps[cmd] is not None and flag in helps[cmd], f"vram {cmd} --help lists {flag}")


def links():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if re.match(r"\w+://", target):
            continue
        check(os.path.exists(os.path.join(SRC, target)), f"link target exists: {target}")


with tempfile.TemporaryDirectory() as tmp:
    program = c_blocks(tmp)
    sh_blocks(tmp, program)
python_blocks()
commands_and_flags()
links()
check(len(README.splitlines()) <= 160, f"the README stays short: {len(README.splitlines())} lines")
sys.exit(done("readme_check"))

#!/usr/bin/env python3
"""test_installed_torch.py — vram as a PyTorch user gets it, on a real GPU, installed two ways: the
build by `cmake --install` into a fresh prefix (PYTHONPATH pointing at the installed package), and
the repository by `pip install` into a virtual environment that sees this python's PyTorch
through a .pth file (offline; nothing on PYTHONPATH). Each time, from a folder outside the repository and with no
VRAM_TORCH_LIBRARY:
  - a training script that calls vram_torch.enable() trains on vram's allocator, from the library
    installed inside the package, and torch.cuda's statistics and summary answer from vram;
  - `python -m vram_torch run --summary` puts an unchanged script on vram and prints the summary;
  - `python -m vram_torch record` traces an unchanged script, and the installed `vram replay --fit`
    reads the trace.
Skipped (status 77) without PyTorch or a CUDA device, and in the sanitizer build.

usage: test_installed_torch.py BUILD_DIR PYTHONDIR SOURCE_DIR
"""
import os
import shutil
import site
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pycheck import check, done, run, script_args  # noqa: E402

TRAIN = """
import torch, vram_torch
vram_torch.enable()
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(m.parameters())
for step in range(3):
    loss = m(torch.randn(256, 1024, device="cuda")).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print("library", vram_torch.library_path())
print("enabled", vram_torch.is_enabled())
print("allocated", torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated(), vram_torch.max_memory_allocated())
print("summary", "Allocated memory" in torch.cuda.memory_summary())
"""

PLAIN = """
import sys, torch
x = torch.ones(1 << 22, device="cuda")
y = (x * 2).sum()
torch.cuda.synchronize()
vt = sys.modules.get("vram_torch")
print("on vram", bool(vt and vt.is_enabled()), float(y))
"""


def used_as_installed(how, py, env, pkg, vram, tmp):
    """The three uses of an installed vram_torch (train.py with enable(), `-m vram_torch run`,
    `-m vram_torch record` then the installed `vram replay --fit`), with python `py` under env,
    the package expected at pkg and the command at vram."""
    r = run([py, "train.py"], cwd=tmp, env=env)
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    check(r.returncode == 0, f"{how}: train.py exits 0 ({r.stderr.strip()[-500:]})")
    check(out.get("library") == os.path.join(pkg, "libvram_torch.so"), f"{how}: the installed library is used: {out.get('library')}")
    check(out.get("enabled") == "True", f"{how}: vram_torch.enable() took")
    nums = [int(x) for x in out.get("allocated", "0 0 0").split()]
    check(nums[0] > 0 and nums[1] >= nums[0] and nums[1] == nums[2],
          f"{how}: torch.cuda's statistics answer from vram (allocated, peak, vram's peak: {nums})")
    check(out.get("summary") == "True", f"{how}: torch.cuda.memory_summary() answers")

    r = run([py, "-m", "vram_torch", "run", "--summary", "plain.py"], cwd=tmp, env=env)
    check(r.returncode == 0 and "on vram True 8388608.0" in r.stdout,
          f"{how}: python -m vram_torch run puts an unchanged script on vram: {r.stdout.strip()[:200]} {r.stderr.strip()[-300:]}")
    check("Allocated memory" in r.stdout + r.stderr, f"{how}: run --summary prints the memory summary")

    trace = os.path.join(tmp, "plain.trace")
    if os.path.exists(trace):
        os.remove(trace)
    r = run([py, "-m", "vram_torch", "record", "-o", trace, "plain.py"], cwd=tmp, env=env)
    check(r.returncode == 0 and os.path.exists(trace) and "on vram False" in r.stdout,
          f"{how}: python -m vram_torch record traces the script under PyTorch's allocator ({r.stderr.strip()[-300:]})")
    r = run([vram, "replay", "--fit", trace], cwd=tmp)
    check(r.returncode == 0 and "fit: smallest capacity" in r.stdout,
          f"{how}: the installed vram replays the recorded trace: {r.stdout.strip()[-300:]} {r.stderr.strip()[-200:]}")


def this_pythons_site_folders():
    """The folders this python imports installed packages from (its venv's, or the system's, and
    the user's), those that exist."""
    folders = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
    return [d for d in folders if os.path.isdir(d)]


def main():
    build, pythondir, source = script_args(
        3, __doc__, unsanitized="the sanitizer build's library cannot be loaded into an uninstrumented python")
    probe = run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"])
    if probe.returncode != 0 or probe.stdout.strip() != "True":
        print("SKIP: needs PyTorch and a CUDA device (%s)" % (probe.stderr.strip().splitlines() or [probe.stdout.strip()])[-1])
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="vram-installed-torch-")
    for name, text in (("train.py", TRAIN), ("plain.py", PLAIN)):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    env = {k: v for k, v in os.environ.items() if k not in ("VRAM_TORCH_LIBRARY", "PYTHONPATH", "VRAM_ALLOC_CONF")}

    prefix = os.path.join(tmp, "prefix")
    r = run(["cmake", "--install", build, "--prefix", prefix])
    check(r.returncode == 0, f"cmake --install exits 0 ({r.stderr.strip()[-300:]})")
    used_as_installed("cmake --install", sys.executable, dict(env, PYTHONPATH=os.path.join(prefix, pythondir)),
                      os.path.join(prefix, pythondir, "vram_torch"), os.path.join(prefix, "bin", "vram"), tmp)

    # pip, into a virtual environment that sees this python's PyTorch, offline. A .pth file names
    # this python's site folders: `venv --system-site-packages` would not do, since where this
    # python is itself a venv's (as on the GPU machine) it names the base interpreter's folders.
    venv = os.path.join(tmp, "venv")
    py = os.path.join(venv, "bin", "python")
    r = run([sys.executable, "-m", "venv", venv])
    if r.returncode != 0 or run([py, "-m", "pip", "--version"]).returncode != 0:
        print("note: no venv with pip here; the pip install is not checked on the GPU")
    else:
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        site = run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], env=env).stdout.strip()
        with open(os.path.join(site, "this_pythons_site.pth"), "w") as f:
            f.write("".join(d + "\n" for d in this_pythons_site_folders()))
        r = run([py, "-c", "import torch"], env=env)
        check(r.returncode == 0, f"the venv sees this python's PyTorch ({r.stderr.strip()[-200:]})")
        r = run([py, "-m", "pip", "install", "--no-index", "--no-cache-dir", source], cwd=tmp, env=env, timeout=600)
        check(r.returncode == 0, f"pip install of the repository ({r.stderr.strip()[-400:]})")
        used_as_installed("pip install", py, env, os.path.join(site, "vram_torch"), os.path.join(venv, "bin", "vram"), tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(done("test_installed_torch"))


if __name__ == "__main__":
    main()

"""torch_setup.py — the start the GPU tests of vram_torch share: torch and enough CUDA devices, or
exit 77 (CTest's "skipped") saying which is missing; libvram_torch.so (argv[1], else found by
vram_torch), whose absence is a failure; then vram_torch enabled before any CUDA allocation.

    from torch_setup import start
    torch, vram_torch = start(min_devices=2)
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def start(min_devices=1):
    try:
        import torch
    except ImportError:
        skip("no torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < min_devices:
        skip("no CUDA device" if min_devices == 1 else "fewer than %d CUDA devices" % min_devices)
    if len(sys.argv) > 1:
        os.environ["VRAM_TORCH_LIBRARY"] = sys.argv[1]
    sys.path.insert(0, os.path.join(REPO, "python"))
    import vram_torch
    path = vram_torch.library_path()
    if not path or not os.path.exists(path):  # CMake built it beside the test: its absence is a failure
        sys.exit("libvram_torch.so not found (%s): build it first" % path)
    vram_torch.enable()
    return torch, vram_torch

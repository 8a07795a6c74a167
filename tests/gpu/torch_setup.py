"""torch_setup.py — the start the GPU tests of vram_torch share: torch, enough CUDA devices and
libvram_torch.so (argv[1], else found by vram_torch), or exit 77 (CTest's "skipped") saying which
is missing; then vram_torch enabled before any CUDA allocation.

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
    if not vram_torch.library_path():
        skip("libvram_torch.so not built")
    vram_torch.enable()
    return torch, vram_torch

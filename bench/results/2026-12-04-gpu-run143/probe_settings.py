"""Does torch.cuda.memory._set_allocator_settings change an allocator that is already running?
Run as `python3 probe_settings.py native` (PyTorch's own allocator) or `... vram` (vram_torch
enabled). Prints the bytes a 5 MiB + 1 request takes before and after roundup_power2_divisions:4
is set at run time and after it is set back."""
import sys
import torch

kind = sys.argv[1] if len(sys.argv) > 1 else "native"
if kind == "vram":
    import vram_torch
    vram_torch.enable()


def taken(nbytes):
    before = torch.cuda.memory_allocated()
    t = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    got = torch.cuda.memory_allocated() - before
    del t
    return got


warm = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")  # the allocator runs
print(kind, "5 MiB + 1 before the call:", taken((5 << 20) + 1))
torch.cuda.memory._set_allocator_settings("roundup_power2_divisions:4")
print(kind, "5 MiB + 1 after roundup_power2_divisions:4:", taken((5 << 20) + 1))
torch.cuda.memory._set_allocator_settings("roundup_power2_divisions:1")
print(kind, "5 MiB + 1 after roundup_power2_divisions:1:", taken((5 << 20) + 1))

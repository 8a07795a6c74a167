#!/usr/bin/env python3
"""plan_residual_check.py — `--residual fp32` (mixed precision with the residual stream kept f32,
as PyTorch's autocast keeps it) widens exactly the activations that hold the stream: on GPT-2 in
bf16 (B=8, T=1024) the planned activations category grows by 2 bytes an element of B x T x C for
each saved layer-norm input (two a block and the final one) when the blocks are kept, and for
each checkpointed block input and the final layer norm's with --checkpoint; parameters, gradients,
optimizer state and temporaries do not move. Usage: plan_residual_check.py VRAM"""
import json
import subprocess
import sys

LAYERS, B, T, C = 12, 8, 1024, 768


def plan(vram, residual, extra):
    cmd = [vram, "plan", "--device", "cuda", "--model", "gpt2", "--batch", str(B), "--precision", "bf16",
           "--residual", residual, "--json"] + extra
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["category_peaks"]


def main():
    vram, unit, ok = sys.argv[1], 2 * B * T * C, True
    for extra, widened in (([], 2 * LAYERS + 1), (["--recompute", "none"], 2 * LAYERS + 1),
                           (["--checkpoint"], LAYERS + 1)):
        low, f32 = plan(vram, "lowp", extra), plan(vram, "fp32", extra)
        grew = f32["activations"] - low["activations"]
        same = all(f32[k] == low[k] for k in ("parameters", "gradients", "optimizer_state", "temporaries"))
        good = grew == widened * unit and same
        ok &= good
        print(f"{' '.join(extra) or 'default'}: activations {low['activations']} -> {f32['activations']} (+{grew}; "
              f"{widened} tensors of B x T x C from 2 to 4 bytes: {widened * unit}); other categories "
              f"{'unchanged' if same else 'CHANGED'}: {'ok' if good else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

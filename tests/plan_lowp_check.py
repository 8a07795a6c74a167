#!/usr/bin/env python3
"""plan_lowp_check.py — `vram train --lowp-weights keep` keeps a 16-bit copy of every weight that
a product casts, and nothing else: on GPT-2 in bf16 the planned parameters category grows by
two bytes per cast element (the tied head padded to 50304 rows; position embeddings and layer
norms are never cast), within the allocator's rounding; the planned run casts nothing per
product, so its temporaries do not grow.  Usage: plan_lowp_check.py VRAM"""
import json
import subprocess
import sys


def plan(vram, how):
    out = subprocess.run([vram, "plan", "--device", "cuda", "--model", "gpt2", "--batch", "8", "--precision", "bf16",
                          "--lowp-weights", how, "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    vram = sys.argv[1]
    cast, keep = plan(vram, "cast"), plan(vram, "keep")
    layers, width, vocab, context = 12, 768, 50257, 1024
    numel = 124439808
    never_cast = context * width + (2 * layers + 1) * 2 * width  # wpe, the layer norms' weights and biases
    padded_head = (50304 - vocab) * width
    want = 2 * (numel - never_cast + padded_head)
    grew = keep["category_peaks"]["parameters"] - cast["category_peaks"]["parameters"]
    ok = want <= grew <= want + 512 * 2 * layers * 8  # at most one rounding unit an allocation
    print(f"parameters grew by {grew} bytes with kept bf16 weights (the cast weights hold {want}): {'ok' if ok else 'FAIL'}")
    tmp_ok = keep["category_peaks"]["temporaries"] <= cast["category_peaks"]["temporaries"]
    print(f"temporaries {cast['category_peaks']['temporaries']} -> {keep['category_peaks']['temporaries']}: "
          f"{'ok' if tmp_ok else 'FAIL'}")
    return 0 if ok and tmp_ok else 1


if __name__ == "__main__":
    sys.exit(main())

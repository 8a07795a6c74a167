"""extra_workloads.py — PyTorch workloads the allocator was never tuned on.

Each workload is a real model with random weights (no downloads) on CUDA; build(NAME) returns its
step() -> float (the loss, or for inference a checksum of the outputs), with every seed fixed, so
the same program runs under every allocator. Two uses:

  - record a trace: `python -m vram_torch record -o NAME.trace bench/extra_workloads.py NAME [STEPS]`
    runs STEPS steps (default 4) under PyTorch's own allocator and writes its allocation stream as
    memtrace v1; `vram replay --fit NAME.trace` then compares vram with the PyTorch figures recorded
    in its header (bench/gpu_final.sh records all four into traces/unseen/);
  - run it under vram: `python bench/torch_workloads.py --alloc vram --workloads vit_train,...`
    measures peak memory, step time and losses as for the four bundled workloads.

  vit_train        timm ViT-B/16, batch 32, bf16 autocast, AdamW
  llama_train      transformers Llama (8 layers, width 1024), batch 4 x 1024, bf16 autocast, AdamW
  t5_varlen_train  transformers T5-small, batch 16, random source/target lengths, AdamW; a step is
                   two batches
  effnet_infer     timm EfficientNet-B0 inference under no_grad, random batch sizes 1..64; a step
                   is eight batches

Inputs come from the device's generator after torch.manual_seed(0) and lengths from
random.Random(0), as the traces in traces/unseen/ were recorded.
"""
import random
import sys

# (torch is imported by the functions, so that bench/torch_workloads.py can list these workloads
# before it chooses the allocator, which must happen before torch starts)


def vit_train():
    import timm
    import torch
    model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=1000).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        x = torch.randn(32, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (32,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()
    return step


def llama_train():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                      num_key_value_heads=16, vocab_size=32000, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        ids = torch.randint(0, cfg.vocab_size, (4, 1024), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()
    return step


def t5_varlen_train():
    import torch
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128, decoder_start_token_id=0,
                   pad_token_id=0)
    model = T5ForConditionalGeneration(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(0)

    def step():
        for _ in range(2):
            src = torch.randint(0, cfg.vocab_size, (16, rng.randint(16, 512)), device="cuda")
            tgt = torch.randint(0, cfg.vocab_size, (16, rng.randint(8, 128)), device="cuda")
            loss = model(input_ids=src, labels=tgt).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return loss.item()
    return step


def effnet_infer():
    import timm
    import torch
    model = timm.create_model("efficientnet_b0", pretrained=False).cuda().eval()
    rng = random.Random(0)

    def step():
        total = 0.0
        with torch.no_grad():
            for _ in range(8):
                total += float(model(torch.randn(rng.randint(1, 64), 3, 224, 224, device="cuda")).float().sum())
        return total
    return step


WORKLOADS = {f.__name__: f for f in (vit_train, llama_train, t5_varlen_train, effnet_infer)}


def build(name):
    """step() -> float for workload `name`, its seeds fixed."""
    import torch
    torch.manual_seed(0)
    return WORKLOADS[name]()


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in WORKLOADS or (len(sys.argv) > 2 and not sys.argv[2].isdigit()):
        print("usage: extra_workloads.py {%s} [steps]" % "|".join(WORKLOADS), file=sys.stderr)
        sys.exit(2)
    step = build(sys.argv[1])
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 4):
        step()  # (each step ends in a synchronizing .item())

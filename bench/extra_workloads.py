"""extra_workloads.py — PyTorch workloads the allocator was never tuned on, for recording traces.

Each workload runs a few steps of a real model with random weights (no downloads) on CUDA. Run
one under `python -m vram_torch record -o NAME.trace bench/extra_workloads.py NAME` to get its
allocation stream as memtrace v1, then `vram replay --fit NAME.trace` compares vram with the
PyTorch figures recorded in its header. bench/record_extra_traces.sh does all of them.

  vit_train        timm ViT-B/16, batch 32, bf16 autocast, AdamW
  llama_train      transformers Llama (8 layers, width 1024), batch 4 x 1024, bf16 autocast, AdamW
  t5_varlen_train  transformers T5-small, batch 16, random source/target lengths, AdamW
  effnet_infer     timm EfficientNet-B0 inference under no_grad, random batch sizes 1..64
"""
import random
import sys

import torch


def vit_train(steps):
    import timm
    model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=1000).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps):
        x = torch.randn(32, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (32,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def llama_train(steps):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                      num_key_value_heads=16, vocab_size=32000, max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps):
        ids = torch.randint(0, cfg.vocab_size, (4, 1024), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def t5_varlen_train(steps):
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128, decoder_start_token_id=0,
                   pad_token_id=0)
    model = T5ForConditionalGeneration(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps * 2):
        src = torch.randint(0, cfg.vocab_size, (16, random.randint(16, 512)), device="cuda")
        tgt = torch.randint(0, cfg.vocab_size, (16, random.randint(8, 128)), device="cuda")
        loss = model(input_ids=src, labels=tgt).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def effnet_infer(steps):
    import timm
    model = timm.create_model("efficientnet_b0", pretrained=False).cuda().eval()
    with torch.no_grad():
        for _ in range(steps * 8):
            model(torch.randn(random.randint(1, 64), 3, 224, 224, device="cuda"))


WORKLOADS = {f.__name__: f for f in (vit_train, llama_train, t5_varlen_train, effnet_infer)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in WORKLOADS:
        print("usage: extra_workloads.py {%s} [steps]" % "|".join(WORKLOADS), file=sys.stderr)
        sys.exit(2)
    random.seed(0)
    torch.manual_seed(0)
    WORKLOADS[sys.argv[1]](int(sys.argv[2]) if len(sys.argv) > 2 else 4)
    torch.cuda.synchronize()

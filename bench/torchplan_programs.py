"""torchplan_programs.py — training programs for the issue-39 measurements (categories, fit, OOM
remedies, leaks), each an ordinary PyTorch script with a --batch-size, random weights from
configs (no downloads), fixed seeds.

    python bench/torchplan_programs.py --model gpt2|resnet50|bert|llama|mlp --batch-size N [--steps S]
        [--amp] [--checkpoint] [--compile] [--leak sum_loss|list|hook] [--mark-steps]

  gpt2      transformers GPT2LMHeadModel (124M), sequences of 512, bf16 autocast, AdamW
  resnet50  torchvision ResNet-50, 224x224, fp32, SGD with momentum
  bert      transformers BertForMaskedLM (base), a random length 64..256 each step (the same
            lengths at every batch size), AdamW
  llama     transformers LlamaForCausalLM (8 layers, width 1024), sequences of 512, bf16 autocast,
            AdamW
  mlp       a 4-layer MLP of width 2048, AdamW (quick: the unit of the GPU tests)
--amp: bf16 autocast (gpt2, llama always), --checkpoint: activation checkpointing, --compile:
torch.compile(model). --leak plants a classic leak: sum_loss (a validation loss summed as a tensor
each step, keeping its graph's activations: `val = val + loss` instead of loss.item()), list (every
step's output appended to a list), hook (a forward hook whose closure keeps the layer's output).
LEAK_LINE markers name the line that allocates the leaked memory (the tests look for it).
"""
import argparse
import random
import sys

import torch


def build(name, checkpoint=False):
    """(model, optimizer, make_batch(step, batch) -> (inputs dict or tensor, target), loss_of(model, inputs, target))."""
    dev = "cuda"
    torch.manual_seed(0)
    if name == "mlp":
        layers = []
        for _ in range(4):
            layers += [torch.nn.Linear(2048, 2048), torch.nn.GELU()]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(2048, 10)).to(dev)

        def make(step, b):
            g = torch.Generator().manual_seed(step)
            return torch.randn(b, 2048, generator=g).to(dev), torch.randint(0, 10, (b,), generator=g).to(dev)

        def loss_of(m, x, y):
            if checkpoint:
                h = x
                for i in range(0, len(m) - 1, 2):
                    h = torch.utils.checkpoint.checkpoint(m[i:i + 2], h, use_reentrant=False)
                out = m[-1](h)
            else:
                out = m(x)
            return torch.nn.functional.cross_entropy(out, y), out
        return model, torch.optim.AdamW(model.parameters(), lr=1e-4), make, loss_of
    if name == "resnet50":
        import torchvision
        model = torchvision.models.resnet50().to(dev)

        def make(step, b):
            g = torch.Generator().manual_seed(step)
            return torch.randn(b, 3, 224, 224, generator=g).to(dev), torch.randint(0, 1000, (b,), generator=g).to(dev)

        def loss_of(m, x, y):
            out = m(x)
            return torch.nn.functional.cross_entropy(out, y), out
        return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), make, loss_of
    if name in ("gpt2", "llama", "bert"):
        import transformers as tf
        if name == "gpt2":
            model, vocab, lengths = tf.GPT2LMHeadModel(tf.GPT2Config(n_positions=512)), 50257, None
        elif name == "llama":
            cfg = tf.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                                 num_key_value_heads=16, vocab_size=32000, max_position_embeddings=512)
            model, vocab, lengths = tf.LlamaForCausalLM(cfg), 32000, None
        else:
            model, vocab, lengths = tf.BertForMaskedLM(tf.BertConfig()), 30522, random.Random(3)
        model = model.to(dev)
        if checkpoint:
            model.gradient_checkpointing_enable()
        seen = {}

        def make(step, b):
            if lengths is not None and step not in seen:
                seen[step] = lengths.randint(64, 256)
            n = seen.get(step, 512)
            g = torch.Generator().manual_seed(step)
            ids = torch.randint(0, vocab, (b, n), generator=g).to(dev)
            return ids, ids

        def loss_of(m, ids, labels):
            out = m(input_ids=ids, labels=labels)
            return out.loss, out.logits
        return model, torch.optim.AdamW(model.parameters(), lr=1e-4), make, loss_of
    raise SystemExit("unknown model %s" % name)


def train(model, opt, make, loss_of, batch, steps, amp=False, leak=None, say=print):
    """The training loop of every program here; bench/torchplan_bench.py's real runs call it too, so
    that the batch they find is the largest of this very program (the step's output is held until
    the next step replaces it, as a loop that logs or inspects it does)."""
    kept, val = [], 0.0
    if leak == "hook":
        target = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][0]
        target.register_forward_hook(lambda mod, inp, out: kept.append(out))  # LEAK_LINE hook
    for step in range(steps):
        x, y = make(step, batch)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss, out = loss_of(model, x, y)  # LEAK_LINE list hook
        loss.backward()
        opt.step()
        if leak == "list":
            kept.append(out)
        if leak == "sum_loss":
            xv, yv = make(1000 + step, batch)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                val = val + loss_of(model, xv, yv)[0]  # LEAK_LINE sum_loss
        say("step %d loss %.4f" % (step, loss.item()))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--amp", action="store_true")
    p.add_argument("--checkpoint", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--leak", choices=["sum_loss", "list", "hook"])
    a = p.parse_args(argv)
    model, opt, make, loss_of = build(a.model, a.checkpoint)
    if a.compile:
        model = torch.compile(model)
    train(model, opt, make, loss_of, a.batch_size, a.steps, a.amp or a.model in ("gpt2", "llama"), a.leak,
          lambda line: print(line, flush=True))


if __name__ == "__main__":
    sys.exit(main())

"""python -m vram_torch record -o run.trace script.py args...  (see vram_torch/record.py)"""
import argparse
import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "record":
        print("usage: python -m vram_torch record -o OUT.trace [--device N] [--max-entries N] script.py [args...]",
              file=sys.stderr)
        return 2
    p = argparse.ArgumentParser(prog="python -m vram_torch record")
    p.add_argument("-o", "--output", required=True, help="memtrace v1 file to write")
    p.add_argument("--device", type=int, default=None, help="CUDA device whose allocations to write")
    p.add_argument("--max-entries", type=int, default=5_000_000, help="size of PyTorch's trace ring")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv[1:])
    from .record import record
    return record(a.output, [a.script] + a.args, a.device, a.max_entries)


if __name__ == "__main__":
    sys.exit(main())

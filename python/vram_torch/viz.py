"""python -m vram_torch viz: PyTorch's own memory snapshot (the pickle that
torch.cuda.memory._dump_snapshot() writes) drawn by `vram viz`, so a memory_viz user can bring
what they already have.

A snapshot pickle holds only dicts, lists, strings and numbers (segments with their blocks,
device_traces with their events and frames): it is read here without PyTorch, by an unpickler
that refuses every class (a pickle that names one is not a snapshot, and loading it could run
code), written out as the JSON layout `vram viz` reads (docs/viz.md), and handed to the `vram`
binary with the other inputs and options. The binary: $VRAM_BIN, else `vram` on PATH.
"""
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

USAGE = ("usage: python -m vram_torch viz INPUT... -o OUT.html [--png FILE] [vram viz options]\n"
         "  INPUT: PyTorch's _dump_snapshot pickle, a memtrace, or a snapshot JSON")


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("it names a class (%s.%s): not a memory snapshot" % (module, name))


def load_snapshot_pickle(path):
    """The snapshot in `path` as plain data; ValueError with the reason when it is not one."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        snap = _PlainUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError) as e:
        raise ValueError("%s: not a readable pickle (%s)" % (path, str(e) or type(e).__name__ + ", cut short?"))
    if not isinstance(snap, dict) or not isinstance(snap.get("segments"), list):
        kind = type(snap).__name__ if not isinstance(snap, dict) else "a dict without 'segments'"
        raise ValueError("%s: a pickle, but not a PyTorch memory snapshot (%s)" % (path, kind))
    traces = snap.get("device_traces", [])
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise ValueError("%s: a pickle, but its 'device_traces' is not a list of event lists" % path)
    return snap


def _is_pickle(path):
    try:
        with open(path, "rb") as f:
            return f.read(1) == b"\x80"
    except OSError:
        return False


def _vram_binary():
    env = os.environ.get("VRAM_BIN")
    return env if env else shutil.which("vram")


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    vram = _vram_binary()
    if not vram:
        print("vram_torch viz: the vram command is not found (put it on PATH, or set VRAM_BIN)", file=sys.stderr)
        return 2
    args = []
    tmpdir = tempfile.mkdtemp(prefix="vram_torch_viz.")
    try:
        for i, a in enumerate(argv):
            if not a.startswith("-") and _is_pickle(a):
                try:
                    snap = load_snapshot_pickle(a)
                except (ValueError, OSError, MemoryError, RecursionError) as e:
                    print("vram_torch viz: %s" % e, file=sys.stderr)
                    return 2
                # under the pickle's own name (the page shows it), in a folder of its own per input
                sub = os.path.join(tmpdir, str(i))
                os.mkdir(sub)
                tmp = os.path.join(sub, os.path.basename(a))
                with open(tmp, "w") as f:
                    json.dump(snap, f, default=str)  # (bytes or other odd leaves become strings)
                args.append(tmp)
            else:
                args.append(a)
        return subprocess.run([vram, "viz"] + args).returncode
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)

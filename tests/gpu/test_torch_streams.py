"""test_torch_streams.py — vram_torch with three streams and memory moving under them, on a GPU.

Tensors of 0.25 to 12 MiB are allocated on three streams, filled there with a value of their own,
used on another stream now and then (wait_stream + record_stream), and freed while their stream
is still busy: often right after a late write queued behind a spin kernel (torch.cuda._sleep), so
that the freed memory is still being written when the host frees it. Legal PyTorch: the
allocator must reuse such memory at once only on the same stream, and on others only after that
work. With page-sized chunks and no reserve slack (VRAM_ALLOC_CONF, unless the caller sets it),
every need beyond the peak moves pages, busy ones by aliasing, so memory moves under the streams
all the time (checked; under a caller's VRAM_ALLOC_CONF only the values are checked, so that any
configuration can be put through it, and --seed gives other sequences). Every few hundred steps
the device is synchronized and every live tensor must still hold its value: memory handed to
another stream early, at its address or through moved pages, shows as a wrong value. Exits 77
(skipped) without torch, a GPU or libvram_torch.so.

    python3 tests/gpu/test_torch_streams.py [libvram_torch.so] [--steps N] [--seed N]
"""
import os
import random
import sys

MOVING_CONF = "chunk_size_mb:2,move_min_mb:2,reserve_slack:0"
os.environ.setdefault("VRAM_ALLOC_CONF", MOVING_CONF)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from pycheck import check, done  # noqa: E402


def int_option(name, default):
    """The value of --NAME N on the command line (taken out of sys.argv), or default."""
    if name not in sys.argv:
        return default
    i = sys.argv.index(name)
    try:
        value = int(sys.argv[i + 1])
    except (IndexError, ValueError):
        print("test_torch_streams: %s needs a whole number" % name, file=sys.stderr)
        sys.exit(2)
    del sys.argv[i:i + 2]
    return value


steps = int_option("--steps", 12000)
seed = int_option("--seed", 20261204)
from torch_setup import start  # noqa: E402

torch, vram_torch = start()
MiB = 1 << 20
rng = random.Random(seed)
streams = [torch.cuda.Stream() for _ in range(3)]
live = {}           # id -> (tensor, value, stream index, streams it was used on besides)
freed_checks = []   # (count of wrong elements as a GPU tensor, id): the value just before the free
sums = []           # (sum computed on another stream, expected)
wrong_live = 0
verifications = 0
next_id = 1


def verify_live():
    """After all queued work: every live tensor still holds its value."""
    global wrong_live, verifications
    torch.cuda.synchronize()
    for k, (t, v, _, _) in live.items():
        if bool((t != v).any()):
            wrong_live += 1
            print("tensor %d (%d bytes): not all %g after the streams' work" % (k, t.numel() * 4, v))
    verifications += 1


for step in range(steps):
    op = rng.random()
    s = rng.randrange(3)
    if op < 0.45 and len(live) < 96:
        n = rng.randrange(MiB // 4, 12 * MiB) // 4
        v = float(next_id % 997 + 1)
        with torch.cuda.stream(streams[s]):
            if rng.random() < 0.2:
                torch.cuda._sleep(rng.randrange(200_000, 3_000_000))  # the stream stays busy a while
            t = torch.empty(n, device="cuda")
            t.fill_(v)
        live[next_id] = (t, v, s, set())
        next_id += 1
    elif op < 0.85 and live:
        k = rng.choice(list(live))
        t, v, s0, used = live.pop(k)
        with torch.cuda.stream(streams[s0]):
            freed_checks.append(((t != v).sum(), k))
            if rng.random() < 0.5:  # a late write: still queued when the host frees the tensor
                for u in used:  # after the other streams' reads of it, as a program must
                    streams[s0].wait_stream(streams[u])
                torch.cuda._sleep(rng.randrange(500_000, 5_000_000))
                t.fill_(-1.0)
        del t
    elif op < 0.93 and live:  # used on another stream, recorded there
        k = rng.choice(list(live))
        t, v, s0, used = live[k]
        s1 = (s0 + 1 + rng.randrange(2)) % 3
        used.add(s1)
        streams[s1].wait_stream(streams[s0])
        with torch.cuda.stream(streams[s1]):
            torch.cuda._sleep(rng.randrange(100_000, 2_000_000))
            sums.append((t.sum(dtype=torch.float64), v * t.numel()))
        t.record_stream(streams[s1])
    elif op < 0.935:
        verify_live()
    if len(freed_checks) > 400:  # keep the per-free results few: read the oldest ones
        torch.cuda.synchronize()
        for bad, k in freed_checks:
            check(int(bad) == 0, "tensor %d held its value until its free" % k)
        freed_checks.clear()
        for got, want in sums:
            check(float(got) == want, "a sum on another stream: %r, expected %r" % (float(got), want))
        sums.clear()

verify_live()
for bad, k in freed_checks:
    check(int(bad) == 0, "tensor %d held its value until its free" % k)
for got, want in sums:
    check(float(got) == want, "a sum on another stream: %r, expected %r" % (float(got), want))
freed_checks, sums, t, got, bad = [], [], None, None, None
check(wrong_live == 0, "live tensors overwritten by other streams' work: %d (over %d verifications)" % (wrong_live, verifications))
check(verifications > 20, "the live set was verified often (%d times)" % verifications)
st = vram_torch.memory_stats()
maps, unmaps = st.get("num_device_alloc", 0), st.get("num_device_free", 0)
print("%d steps, %d tensors, %d verifications; device calls: %d maps, %d unmaps; peak reserved %.1f MiB, peak allocated %.1f MiB"
      % (steps, next_id - 1, verifications, maps, unmaps, st.get("reserved_bytes.all.peak", 0) / MiB,
         st.get("allocated_bytes.all.peak", 0) / MiB))
if os.environ["VRAM_ALLOC_CONF"] == MOVING_CONF:  # another configuration may move nothing
    check(unmaps > 100, "memory moved under the streams (%d unmaps)" % unmaps)
live.clear()
torch.cuda.synchronize()
vram_torch.empty_cache()
check(vram_torch.memory_allocated() == 0, "everything freed: %d bytes allocated" % vram_torch.memory_allocated())
sys.exit(done("test_torch_streams"))

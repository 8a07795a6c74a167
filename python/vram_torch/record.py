"""record.py — any PyTorch program's CUDA allocations as a memtrace v1 file.

    python -m vram_torch record -o run.trace [--device N] [--max-entries N] script.py args...

The program runs unchanged, with PyTorch's own allocator, under
torch.cuda.memory._record_memory_history (no stack capture, so it costs little). At its end the
allocator's trace ring is read from torch.cuda.memory._snapshot() and turned into memtrace v1
(the format of the bundled traces, docs/benchmarks.md §1):

    a ID SIZE STREAM     an "alloc" entry: requested size, a new dense id, the stream as a
                         small integer in order of first use (the default stream is 0)
    f ID                 the program's free of that allocation ("free_requested"; older
                         PyTorch versions without it: "free_completed")

and header lines with PyTorch's own peaks for the run, so `vram replay` can compare:
peak_requested_bytes (from the trace), pytorch_native_peak_allocated_bytes and
pytorch_native_peak_reserved_bytes (or pytorch_expandable_segments_peak_reserved_bytes when the
program ran with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True). The command exits with the
program's status; a program that fails (an exception, or a status other than 0) still gets its
trace, up to where it stopped, with a "partial" header line saying how it ended; so does one that
ends by os._exit() or is stopped by SIGTERM (launch.run_to_the_end), whose exit status or signal
the command passes on. Under torchrun
(`torchrun -m vram_torch record -o run.trace train.py`) each rank writes its own file (per_rank).
"""
import datetime
import os
import sys

from .launch import BadInput, check_script, require_torch, run_to_the_end


def convert(traces, out, header, marks=None, live_at_start=()):
    """Writes memtrace v1 for one device's trace entries; returns (allocations, peak, skipped).
    marks: {entry index: the "# ..." lines written before that entry's records}.
    live_at_start: (address, size, stream) of blocks allocated before the entries begin, written
    as allocations ahead of them (so that their frees are not skipped and the peaks count them)."""
    free_action = "free_requested"
    if not any(e.get("action") == "free_requested" for e in traces):
        free_action = "free_completed"
    head = [{"action": "alloc", "addr": addr, "size": size, "stream": stream} for addr, size, stream in live_at_start]
    if head:  # as allocations the entries begin with; the marks stay before the entries they name
        marks = {k + len(head): v for k, v in (marks or {}).items()}
        traces = head + list(traces)
    ids, streams = {}, {0: 0}
    next_id = live = peak = skipped = 0
    body = []
    for index, e in enumerate(traces):
        if marks and index in marks:
            body.extend(marks[index])
        action = e.get("action")
        if action == "alloc":
            addr, size, stream = e["addr"], int(e["size"]), int(e.get("stream", 0))
            if addr in ids:  # an address reused without a free we saw: treat the old one as freed
                old_id, old_size = ids.pop(addr)
                body.append("f %d" % old_id)
                live -= old_size
            s = streams.setdefault(stream, len(streams))
            ids[addr] = (next_id, size)
            body.append("a %d %d %d" % (next_id, size, s))
            next_id += 1
            live += size
            peak = max(peak, live)
        elif action == free_action:
            got = ids.pop(e["addr"], None)
            if got is None:
                skipped += 1  # allocated before recording started
                continue
            body.append("f %d" % got[0])
            live -= got[1]
    out.write("# memtrace v1\n")
    header = dict(header)
    header["peak_requested_bytes"] = peak
    header["allocations"] = next_id
    if skipped:
        header["frees_of_earlier_allocations_skipped"] = skipped
    for k, v in header.items():
        out.write("# %s: %s\n" % (k, v))
    for line in body:
        out.write(line + "\n")
    return next_id, peak, skipped


def check_output(output, what="vram_torch record: -o"):
    """Exits with a clear message (naming `what`) when the file could not be written: checked
    before the program runs, not after it."""
    if not output:
        raise BadInput("%s: an output file is needed" % what)
    if os.path.isdir(output):
        raise BadInput("%s %s: is a folder" % (what, output))
    if output.endswith(os.sep):  # open() would refuse it only after the program ran
        raise BadInput("%s %s: names a folder, not a file" % (what, output))
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise BadInput("%s %s: no such folder %s" % (what, output, folder))
    if not os.access(folder, os.W_OK) or (os.path.exists(output) and not os.access(output, os.W_OK)):
        raise BadInput("%s %s: not writable" % (what, output))


def per_rank(output):
    """The file this process records to. Under torchrun (WORLD_SIZE above 1) every rank runs the
    command with the same -o: "{rank}" in it becomes the rank, or else ".rankN" goes before the
    file's extension (run.trace -> run.rank1.trace), so that the ranks do not write over each
    other; elsewhere -o as given."""
    rank, world = os.environ.get("RANK", "0"), os.environ.get("WORLD_SIZE", "1")
    if "{rank}" in output:
        return output.replace("{rank}", rank)
    if not world.isdigit() or int(world) < 2:
        return output
    root, ext = os.path.splitext(output)
    return "%s.rank%s%s" % (root, rank, ext)


def record(output, argv, device=None, max_entries=5_000_000):
    check_script("record", argv)
    output = per_rank(output)
    check_output(output)
    output = os.path.abspath(output)  # where it was checked, also if the program changes folder
    if max_entries < 1:
        raise BadInput("vram_torch record: --max-entries must be at least 1, not %d" % max_entries)
    torch = require_torch("record")
    if device is not None and not 0 <= device < torch.cuda.device_count():
        raise BadInput("vram_torch record: --device %d: this machine has %d CUDA device(s)"
                         % (device, torch.cuda.device_count()))
    # The caching allocator reads its configuration when recording starts it here; a script that
    # sets PYTORCH_CUDA_ALLOC_CONF itself later changes nothing, so the header names the
    # allocator from the setting in effect now.
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + "," + os.environ.get("PYTORCH_ALLOC_CONF", "")
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=max_entries)

    def finish(failed):
        try:
            write_trace(torch, output, argv, device, max_entries, conf, failed)
            return True
        except Exception as e:  # (raising here would replace the program's own exception)
            print("vram_torch record: no trace written to %s: %s: %s" % (output, type(e).__name__, e), file=sys.stderr)
            return False
    return run_to_the_end(argv, finish)


def write_trace(torch, output, argv, device, max_entries, conf, failed):
    """Reads PyTorch's trace ring and writes it to output as memtrace v1, with PyTorch's peaks in
    the header (and a "partial" line when the program failed: `failed` says how)."""
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    traces = snap.get("device_traces", [])
    if device is None:  # the device with the most entries
        device = max(range(len(traces)), key=lambda i: len(traces[i])) if traces else 0
    entries = traces[device] if device < len(traces) else []
    if len(entries) >= max_entries:
        print("vram_torch record: the trace ring filled (%d entries): the start of the run is "
              "missing; raise --max-entries" % len(entries), file=sys.stderr)
    now = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + "," + os.environ.get("PYTORCH_ALLOC_CONF", "")
    if now != conf:
        print("vram_torch record: the program set PYTORCH_CUDA_ALLOC_CONF after the allocator had started "
              "(with %r); set it before `python -m vram_torch record` to record under it" % conf.strip(","),
              file=sys.stderr)
    kind = "expandable_segments" if "expandable_segments:true" in conf.lower().replace(" ", "") else "native"
    world = os.environ.get("WORLD_SIZE", "1")
    rank = ", rank %s of %s" % (os.environ.get("RANK", "0"), world) if world.isdigit() and int(world) > 1 else ""
    header = {
        "source": "PyTorch %s (CUDA %s), program %s%s, %s, %s" % (
            torch.__version__.split("+")[0], torch.version.cuda, " ".join(argv), rank,
            torch.cuda.get_device_name(device), datetime.date.today().isoformat()),
        "pytorch_%s_peak_allocated_bytes" % kind: torch.cuda.max_memory_allocated(device),
        "pytorch_%s_peak_reserved_bytes" % kind: torch.cuda.max_memory_reserved(device),
    }
    if failed:
        header["partial"] = "the program %s; the trace stops where it did" % failed
    n, peak, skipped = write_whole(output, lambda f: convert(entries, f, header))
    print("vram_torch record: %s%d allocations, peak requested %d bytes -> %s"
          % ("the program %s: partial trace, " % failed if failed else "", n, peak, output), file=sys.stderr)


def write_whole(output, write):
    """Calls write(f) on a new file beside output and renames it over output, so that a write that
    fails part-way (a full disk, SIGKILL) leaves an earlier trace of that name whole; returns
    write's result. Where no file can be made beside it, or output cannot be replaced (another
    user's file in a sticky folder such as /tmp), write(f) writes output in place."""
    tmp = "%s.%d.tmp" % (output, os.getpid())
    try:
        f = open(tmp, "x")
    except OSError:
        with open(output, "w") as f:
            return write(f)
    try:
        with f:
            result = write(f)
        try:
            os.replace(tmp, output)
        except PermissionError:
            with open(output, "w") as f:
                result = write(f)
        return result
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)

"""The vram_torch commands:

    python -m vram_torch run [--summary] [--categories] [--leaks] [--out FILE.json] script.py args...
        runs the program unchanged with vram as PyTorch's CUDA allocator (vram_torch.enable()
        first), and with --summary prints vram's memory summary of each device it used at the end;
        --categories prints memory by category per step and phase and writes it as JSON (--out,
        default vram_categories.json; tracker.py), --leaks names memory growing step over step
        (leak_finder.py)
    python -m vram_torch record -o run.trace [--device N] [--max-entries N] script.py args...
        records the program's allocations under PyTorch's own allocator (see record.py)
    python -m vram_torch fit --capacity 40GiB [--vram PATH] [--device cudasim] B1=TRACE B2=TRACE [B3=TRACE]
        the largest batch that fits, from traces recorded at small batches: each allocation's size
        fitted as a + c*batch, the stream synthesized at larger batches and replayed through vram's
        allocator (fit.py; no PyTorch needed)
    python -m vram_torch fit --capacity 40GiB [--allocator vram|native|expandable] -- train.py --batch-size {batch}
        the same from the program itself: two short recorded runs at small batches, the search by
        replay, one confirming run (fit_run.py)
    python -m vram_torch viz SNAPSHOT.pickle... -o OUT.html [--png FILE]
        draws PyTorch's _dump_snapshot pickle (and memtraces, snapshot JSON) with `vram viz` (viz.py)
    python -m vram_torch --version
        the package's version and the libvram_torch.so it loads (status 1 if none loads)
"""
import argparse
import os
import sys

USAGE = ("usage: python -m vram_torch run [--summary] [--categories] [--leaks] [--out FILE] script.py [args...]\n"
         "       python -m vram_torch record -o OUT.trace [--device N] [--max-entries N] script.py [args...]\n"
         "       python -m vram_torch fit --capacity SIZE [--vram PATH] B1=TRACE B2=TRACE [B3=TRACE]\n"
         "       python -m vram_torch fit --capacity SIZE [--allocator vram|native|expandable] -- script.py ... {batch} ...\n"
         "       python -m vram_torch viz SNAPSHOT.pickle... -o OUT.html [--png FILE]\n"
         "       python -m vram_torch --version")


def _parse(p, argv, with_value=()):
    """The command's own options, up to the script, parsed by p; the script's arguments exactly as
    given (a.args), as `python script.py args...` passes them: argparse, left to parse them, takes
    a "--" out of them. with_value: the options that take a value (a long one also abbreviated)."""
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-", "--"):
        takes = argv[i] in with_value or (argv[i].startswith("--") and "=" not in argv[i]
                                           and any(o.startswith(argv[i]) for o in with_value))
        i += 2 if takes else 1
    if i < len(argv) and argv[i] == "--":  # the end of the command's options: the script follows
        i += 1
    a = p.parse_args(argv[:i + 1])
    a.args = argv[i + 1:]
    return a


def run(argv):
    p = argparse.ArgumentParser(prog="python -m vram_torch run")
    p.add_argument("--summary", action="store_true", help="print vram's memory summary of each device used at the end")
    p.add_argument("--categories", action="store_true", help="memory by category per step and phase")
    p.add_argument("--leaks", action="store_true", help="memory surviving step boundaries and growing")
    p.add_argument("--out", default="vram_categories.json", help="where --categories writes its JSON")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = _parse(p, argv, ("--out",))
    from .launch import check_script, require_torch, run_script, run_to_the_end
    check_script("run", [a.script])
    if a.categories or a.leaks:
        from .record import check_output
        check_output(a.out, "vram_torch run: --out")
        a.out = os.path.abspath(a.out)  # (where it was checked, also if the program changes folder)
    torch = require_torch("run")
    import vram_torch
    try:
        vram_torch.enable()
    except (RuntimeError, ValueError) as e:  # no library, a bad setting, CUDA already started: one line, status 1
        raise SystemExit("vram_torch run: %s" % e)
    if not (a.summary or a.categories or a.leaks):
        return run_script([a.script] + a.args)
    if a.categories or a.leaks:
        vram_torch.track(leaks=a.leaks, program=[a.script] + a.args)

    def summaries(failed):  # also after os._exit() or SIGTERM
        if (a.categories or a.leaks) and not _categories_end(vram_torch, a, failed):
            return False
        if not a.summary:
            return True
        try:
            for d in range(torch.cuda.device_count()):
                if vram_torch._active(d):
                    print(vram_torch.memory_summary(d), file=sys.stderr)
            return True
        except Exception as e:  # (raising here would replace the program's own exception)
            print("vram_torch run: no summary: %s: %s" % (type(e).__name__, e), file=sys.stderr)
            return False
    return run_to_the_end([a.script] + a.args, summaries)


def _categories_end(vram_torch, a, failed):
    """Prints the categories' table and the leaks' report, and writes both as JSON (--out); False
    when they could not be made."""
    from . import category_report as cr
    try:
        record = vram_torch.categories()
        if failed:
            record["notes"].append("the program %s" % failed)
        if a.categories:
            print(cr.format_table(record), file=sys.stderr)
        if a.leaks:
            from . import tracker as cat
            finder = cat.current().leaks
            record["leaks"] = finder.leaks()
            record["leak_boundaries"] = list(finder.steps)
            print(finder.report(), file=sys.stderr)
        explained = vram_torch.explain_oom()
        if explained:
            record["oom"] = {k: v for k, v in explained.items() if k != "at_failure"}
            print("\n".join(explained["lines"]), file=sys.stderr)
        cr.write_json(record, a.out)
        print("vram_torch run: categories%s written to %s" % (" and leaks" if a.leaks else "", a.out), file=sys.stderr)
        bad = cr.check_sums(record)
        if bad:  # cannot happen while every block has one tag; said rather than hidden
            print("vram_torch run: categories do not add up at %s" % bad[:3], file=sys.stderr)
            return False
        return True
    except Exception as e:  # (raising here would replace the program's own exception)
        print("vram_torch run: no categories: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return False


def record(argv):
    p = argparse.ArgumentParser(prog="python -m vram_torch record")
    p.add_argument("-o", "--output", required=True, help="memtrace v1 file to write")
    p.add_argument("--device", type=int, default=None, help="CUDA device whose allocations to write")
    p.add_argument("--max-entries", type=int, default=5_000_000, help="size of PyTorch's trace ring")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = _parse(p, argv, ("-o", "--output", "--device", "--max-entries"))
    from .record import record as record_program
    return record_program(a.output, [a.script] + a.args, a.device, a.max_entries)


def fit(argv):
    if "--" in argv or any(a.endswith(".py") for a in argv):  # a program to run, not traces
        from .fit_run import main as fit_run_main
        return fit_run_main(argv)
    from .fit import main as fit_main
    return fit_main(argv)


def fit_child(argv):
    from .fit_child import main as child_main
    return child_main(argv)


def version():
    """Prints the package's version and the library it would use; 1 if that library is missing,
    does not load or is another version's."""
    import vram_torch
    print("vram_torch %s (%s)" % (vram_torch.__version__, vram_torch.__file__))
    try:
        lib = vram_torch._load()
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    print("libvram_torch.so %s (%s)" % (lib.vram_torch_version().decode(), lib._path))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    from .viz import main as viz
    commands = {"run": run, "record": record, "fit": fit, "viz": viz, "_fit_child": fit_child}
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv == ["--version"]:
        return version()
    if not argv or argv[0] not in commands:
        print(USAGE, file=sys.stderr)
        return 2
    from .launch import BadInput
    try:
        return commands[argv[0]](argv[1:])
    except BadInput as e:  # one line and status 2, as vram's tools answer bad input
        print(e.message, file=sys.stderr)
        return e.code


if __name__ == "__main__":
    sys.exit(main())

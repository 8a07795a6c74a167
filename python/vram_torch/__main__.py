"""The vram_torch commands:

    python -m vram_torch run [--summary] script.py args...
        runs the program unchanged with vram as PyTorch's CUDA allocator (vram_torch.enable()
        first), and with --summary prints vram's memory summary of each device it used at the end
    python -m vram_torch record -o run.trace [--device N] [--max-entries N] script.py args...
        records the program's allocations under PyTorch's own allocator (see record.py)
    python -m vram_torch viz SNAPSHOT.pickle... -o OUT.html [--png FILE]
        draws PyTorch's _dump_snapshot pickle (and memtraces, snapshot JSON) with `vram viz` (viz.py)
    python -m vram_torch --version
        the package's version and the libvram_torch.so it loads (status 1 if none loads)
"""
import argparse
import sys

USAGE = ("usage: python -m vram_torch run [--summary] script.py [args...]\n"
         "       python -m vram_torch record -o OUT.trace [--device N] [--max-entries N] script.py [args...]\n"
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
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = _parse(p, argv)
    from .launch import check_script, require_torch, run_script, run_to_the_end
    check_script("run", [a.script])
    torch = require_torch("run")
    import vram_torch
    try:
        vram_torch.enable()
    except (RuntimeError, ValueError) as e:  # no library, a bad setting, CUDA already started: one line, status 1
        raise SystemExit("vram_torch run: %s" % e)
    if not a.summary:
        return run_script([a.script] + a.args)

    def summaries(failed):  # also after os._exit() or SIGTERM
        try:
            for d in range(torch.cuda.device_count()):
                if vram_torch._active(d):
                    print(vram_torch.memory_summary(d), file=sys.stderr)
            return True
        except Exception as e:  # (raising here would replace the program's own exception)
            print("vram_torch run: no summary: %s: %s" % (type(e).__name__, e), file=sys.stderr)
            return False
    return run_to_the_end([a.script] + a.args, summaries)


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
    commands = {"run": run, "record": record, "viz": viz}
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

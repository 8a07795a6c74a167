"""launch.py — runs a Python program as `python script.py args...` would, inside this process,
for the `python -m vram_torch` commands (record, run): sys.argv and sys.path[0] as the program
expects them, its SystemExit turned into an exit status (a message printed, as Python does), both
restored afterwards."""
import os
import runpy
import sys


class BadInput(SystemExit):
    """Bad input to a `python -m vram_torch` command: main() prints the message and exits with
    status 2, as vram's own tools do for bad input (str() is the message)."""

    def __init__(self, message):
        super().__init__(2)
        self.message = message

    def __str__(self):
        return self.message


def check_script(tool, argv):
    """Exits with a clear message when argv names no existing script."""
    if not argv:
        raise BadInput("vram_torch %s: no script given (usage: python -m vram_torch %s ... script.py args...)"
                         % (tool, tool))
    if not os.path.exists(argv[0]):
        raise BadInput("vram_torch %s: no such script: %s" % (tool, argv[0]))
    if os.path.isdir(argv[0]) and not os.path.exists(os.path.join(argv[0], "__main__.py")):
        raise BadInput("vram_torch %s: %s is a folder without __main__.py" % (tool, argv[0]))  # as python runs one


def require_torch(tool):
    """Imports torch, or exits with one line saying it is needed (not a traceback)."""
    try:
        import torch
    except ImportError as e:
        raise SystemExit("vram_torch %s: PyTorch is needed and could not be imported (%s)" % (tool, e))
    return torch


def run_script(argv):
    """Runs argv[0] as __main__ with sys.argv = argv; returns its exit status."""
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    try:
        runpy.run_path(argv[0], run_name="__main__")
        return 0
    except SystemExit as e:
        if isinstance(e.code, int) or e.code is None:
            return e.code or 0
        print(e.code, file=sys.stderr)  # as Python does for sys.exit("message")
        return 1
    finally:
        sys.argv, sys.path = old_argv, old_path

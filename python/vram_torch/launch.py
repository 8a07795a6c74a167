"""launch.py — runs a Python program as `python script.py args...` would, inside this process,
for the `python -m vram_torch` commands (record, run): sys.argv and sys.path[0] as the program
expects them, its SystemExit turned into an exit status (a message printed, as Python does), both
restored afterwards; and, for work that must follow the program however it ends (record's trace,
run's summary), run_to_the_end."""
import os
import runpy
import signal
import sys
import threading


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


STOPPED = "was stopped by SIGTERM"


class Terminated(BaseException):
    """SIGTERM reached the process while run_to_the_end ran the program: it unwinds, as on Ctrl-C."""


def run_to_the_end(argv, finish):
    """Runs argv as run_script does, then finish(failed) once, however the program ends: failed is
    None when it ended well, else how it ended ("exited with status 3", "raised ValueError",
    "called os._exit(7)", STOPPED). That includes the two ends that run no `finally`: os._exit()
    (which DDP scripts call to skip a hanging teardown) and SIGTERM (what torchrun and batch
    schedulers send to stop a job) (_Ending). finish returns False when its own work failed; a
    program that ended well then exits 1. Returns the exit status; the program's exception is
    raised again, and a program stopped by SIGTERM ends this process by SIGTERM after finish."""
    ending = _Ending(finish)
    status, failed = 0, "raised"
    try:
        with ending:
            status = run_script(argv)
        failed = "exited with status %s" % status if status else None
    except Terminated:
        failed = STOPPED
    except BaseException as e:
        failed = "raised %s" % type(e).__name__
        raise
    finally:
        if not ending.finish(failed) and not failed:
            status = 1
    if failed == STOPPED:
        _die_by_sigterm()
        return 128 + signal.SIGTERM
    return status


def _die_by_sigterm():
    """Ends the process by SIGTERM, as it would have ended without us, so that the parent
    (torchrun, a scheduler) sees the signal."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


class _Ending:
    """finish(failed) once (run_to_the_end). While the program runs (`with`), os._exit calls it
    before it exits, and SIGTERM, unless the program handles it itself, raises Terminated in the
    main thread. A process the program forks (multiprocessing, DataLoader workers) inherits both
    and behaves as without them: its os._exit exits, its SIGTERM kills it, and finish is not called."""

    def __init__(self, finish):
        self.work, self.done, self.ok, self.pid = finish, False, False, os.getpid()

    def finish(self, failed):
        if not self.done:
            self.done = True
            self.ok = self.work(failed)
        return self.ok

    def __enter__(self):
        self.real_exit, os._exit = os._exit, self._exit
        self.old_term = None
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self.old_term = signal.signal(signal.SIGTERM, self._sigterm)
        return self

    def __exit__(self, *exc):
        os._exit = self.real_exit
        if self.old_term is not None and signal.getsignal(signal.SIGTERM) == self._sigterm:
            signal.signal(signal.SIGTERM, self.old_term)
        return False

    def _exit(self, status):
        if os.getpid() == self.pid and isinstance(status, int):  # (not an int: os._exit raises, as it would)
            if not self.finish("called os._exit(%d)" % status if status else None) and not status:
                status = 1
        self.real_exit(status)

    def _sigterm(self, signum, frame):
        if os.getpid() != self.pid:  # a forked child: the default action, at once
            _die_by_sigterm()
        raise Terminated()

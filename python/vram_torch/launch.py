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


def run_to_the_end(argv, finish):
    """Runs argv as run_script does, then finish(failed) once, however the program ends: failed is
    None when it ended well, else how it ended ("exited with status 3", "raised ValueError",
    "called os._exit(7)", STOPPED). That includes the two ends that run no `finally`: os._exit()
    (which DDP scripts call to skip a hanging teardown) and SIGTERM (what torchrun and batch
    schedulers send to stop a job) (_Ending). finish returns False when its own work failed; a
    program that ended well then exits 1. Returns the exit status; the program's exception is
    raised again."""
    status, failed = 0, "raised"
    with _Ending(finish) as ending:
        try:
            status = run_script(argv)
            failed = "exited with status %s" % status if status else None
        except BaseException as e:
            failed = "raised %s" % type(e).__name__
            raise
        finally:
            if not ending.finish(failed) and not failed:
                status = 1
    return status


class _Ending:
    """finish(failed) once, from whichever thread gets there first (run_to_the_end). While the
    program and then finish run (`with`):
      - os._exit calls it before the process exits;
      - SIGTERM, unless the program handles it itself, calls it with STOPPED and then ends the
        process by SIGTERM, as it would have ended. Python runs a signal handler only in the main
        thread between bytecodes, which a rank blocked in a CUDA or NCCL wait does not reach
        (torchrun sends SIGTERM to exactly such ranks, and SIGKILL only 30 s later), so a watcher
        thread does it, woken through signal.set_wakeup_fd; the handler does it too, for when the
        program replaced the wakeup fd (asyncio does). A SIGTERM while finish runs ends the
        process once finish is done.
    A process the program forks (multiprocessing, DataLoader workers) behaves as without us: its
    os._exit exits and SIGTERM kills it, neither calls finish, and it lets go of the wakeup pipe,
    so that its signals never reach this process's watcher."""

    def __init__(self, finish):
        self.work, self.done, self.ok, self.pid = finish, False, False, os.getpid()
        self.lock = threading.RLock()
        self.finisher, self.stop_after = None, False  # the thread in finish; SIGTERM came meanwhile
        self.old_term = self.wake = None

    def finish(self, failed):
        with self.lock:
            if not self.done:
                self.done, self.finisher = True, threading.get_ident()
                try:
                    self.ok = self.work(failed)
                finally:
                    self.finisher = None
                if self.stop_after:  # SIGTERM came while this (main) thread ran finish
                    self._die_by_sigterm()
            return self.ok

    def __enter__(self):
        self.real_exit, os._exit = os._exit, self._exit
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self.old_term = signal.signal(signal.SIGTERM, self._sigterm)
            try:
                r, w = os.pipe()
            except OSError:  # (no file descriptors left: the handler alone, as under asyncio)
                return self
            os.set_blocking(w, False)
            try:
                self.old_wakeup = signal.set_wakeup_fd(w)
            except ValueError:
                os.close(r)
                os.close(w)
                return self
            self.wake = (r, w)
            threading.Thread(target=self._watch, args=(r,), name="vram_torch SIGTERM", daemon=True).start()
            os.register_at_fork(after_in_child=self._forked)
        return self

    def __exit__(self, *exc):
        os._exit = self.real_exit
        if self.old_term is not None and signal.getsignal(signal.SIGTERM) == self._sigterm:
            signal.signal(signal.SIGTERM, self.old_term)
        if self.wake:
            now = signal.set_wakeup_fd(self.old_wakeup)
            if now != self.wake[1]:  # the program set a wakeup fd of its own: it keeps it
                signal.set_wakeup_fd(now)
            w, self.wake = self.wake[1], None
            os.close(w)  # the watcher reads the pipe's end and stops
        return False

    def _exit(self, status):
        if os.getpid() == self.pid and isinstance(status, int):  # (not an int: os._exit raises, as it would)
            if not self.finish("called os._exit(%d)" % status if status else None) and not status:
                status = 1
        self.real_exit(status)

    def _sigterm(self, signum, frame):
        if os.getpid() != self.pid:
            self._die_by_sigterm()
        if self.finisher == threading.get_ident():  # this (main) thread is in finish: it ends the
            self.stop_after = True                  # process once finish is done
            return
        self.finish(STOPPED)
        self._die_by_sigterm()

    def _watch(self, r):
        try:
            while True:
                got = os.read(r, 64)
                if not got:
                    return
                # (a program that set a SIGTERM handler of its own, to checkpoint say, keeps it: the
                # wakeup fd hears every signal that has a Python handler)
                if signal.SIGTERM in got and signal.getsignal(signal.SIGTERM) == self._sigterm:
                    self.finish(STOPPED)
                    self._die_by_sigterm()
        finally:
            os.close(r)

    def _forked(self):
        wake = self.wake
        if wake is None or os.getpid() == self.pid:
            return
        try:
            now = signal.set_wakeup_fd(-1)
            if now != wake[1]:
                signal.set_wakeup_fd(now)
        except ValueError:
            pass
        for fd in wake:  # (the parent's watcher sees the pipe's end only once every copy of w is closed)
            os.close(fd)

    def _die_by_sigterm(self):
        """Ends the process by SIGTERM (the parent sees the signal), from any thread: Python lets
        only the main thread change a signal's handler, so the C library's signal() sets the
        default action; where that cannot be done, exit status 143, as a shell reports it."""
        try:
            import ctypes
            libc = ctypes.CDLL(None)
            libc.signal.restype = ctypes.c_void_p
            libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
            libc.signal(signal.SIGTERM, None)  # SIG_DFL
            os.kill(os.getpid(), signal.SIGTERM)
        except Exception:
            pass
        self.real_exit(128 + signal.SIGTERM)

"""pycheck.py — the check() the standalone Python tests share (CTest runs each as a script).

    sys.path.insert(0, <this directory>); from pycheck import check, done
    check(cond, "what should hold")   # counts; prints "FAIL: what" on stderr when cond is false
    sys.exit(done("test_name"))       # prints "test_name: N passed, M failed"; 1 if any failed
"""
import sys

passed = 0
failed = 0


def check(cond, what):
    """Counts one check; prints what failed. Returns cond, so a test can branch on it."""
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)
    return cond


def done(name):
    """Prints the tally and returns the exit status: 1 if any check failed, else 0."""
    print("%s: %d passed, %d failed" % (name, passed, failed))
    return 1 if failed else 0

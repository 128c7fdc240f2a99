#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tests/watchdog.py -- COMMAND [ARGS...]: every ctest test runs under this (tests/CMakeLists.txt
wraps add_test), so that a test's time limit is a watchdog for a hang, not a budget for the
whole test (issue #25: the suite must stay green on a slow or busy machine).

The test's output (stdout and stderr, merged as ctest shows them) passes through unchanged;
the test is stopped only when it prints nothing for ING_TEST_STALL seconds (set per test from
its TIMEOUT property: what used to be the limit of the whole test is now the limit of one
silent stretch); ctest's TIMEOUT, five times the old one, stays as the cap for a test that
hangs while it prints. On a stall: the test's process group gets SIGTERM, then SIGKILL 10 s
later, and the line says which test, how long it was silent and its last line of output.
The exit status is the test's (77, ctest's "not run", included); killed by a signal N: 128 + N.
Python children are made unbuffered (PYTHONUNBUFFERED) so their progress is seen as it is made.
"""
import os
import selectors
import signal
import subprocess
import sys
import time


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: watchdog.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    try:
        stall = float(os.environ.get("ING_TEST_STALL", "0"))
    except ValueError:
        stall = 0.0
    # ING_TEST_RUNNER_PID: the process that runs the tests (ctest), for a fixture that must
    # live as long as the run (tests/tier/tier_ceph.sh's keeper), not as long as this wrapper
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               ING_TEST_RUNNER_PID=os.environ.get("ING_TEST_RUNNER_PID", str(os.getppid())))
    try:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=env, process_group=0)
    except TypeError:   # Python < 3.11: no process_group
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=env, preexec_fn=os.setpgrp)
    except OSError as e:
        print(f"watchdog: cannot run {argv[0]}: {e.strerror}", file=sys.stderr)
        return 127

    def forward(sig, _frame):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            pass
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)

    out = sys.stdout.buffer
    sel = selectors.DefaultSelector()
    fd = child.stdout.fileno()
    os.set_blocking(fd, False)
    sel.register(fd, selectors.EVENT_READ)
    last = time.monotonic()
    tail = b""
    stalled = False
    exited_at = None
    while True:
        now = time.monotonic()
        if exited_at is None and child.poll() is not None:
            exited_at = now
        # after the test's own process ended, its leftovers (a daemon holding the pipe) get
        # 5 s to close it; the test's verdict is its exit status
        if exited_at is not None and now - exited_at > 5:
            break
        wait = 1.0
        if stall > 0 and exited_at is None:
            wait = min(wait, max(0.0, stall - (now - last)))
        events = sel.select(wait)
        if events:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                break
            out.write(data)
            out.flush()
            last = time.monotonic()
            tail = (tail + data)[-600:]
            continue
        if stall > 0 and exited_at is None and time.monotonic() - last >= stall:
            stalled = True
            break
    if stalled:
        silent = time.monotonic() - last
        lines = [x for x in tail.splitlines() if x.strip()]
        tail = lines[-1][-300:] if lines else b""
        msg = (f"\nwatchdog: the test printed nothing for {silent:.0f} s (ING_TEST_STALL={stall:.0f}):"
               f" a hang; stopping it. Its last line: {tail.decode(errors='replace').strip() or '(none)'}\n")
        out.write(msg.encode())
        out.flush()
        forward(signal.SIGTERM, None)
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            forward(signal.SIGKILL, None)
            child.wait()
        return 124
    rc = child.wait()
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main())

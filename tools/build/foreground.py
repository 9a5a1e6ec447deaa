"""Run a command as its terminal's foreground process group: `make demo` runs `llmchat serve` so. Ctrl-C then
reaches the command alone, which ends cleanly on it (serve exits 0), and make sees a command that succeeded. Were
make in the foreground too, it would take the SIGINT itself, and GNU make re-raises a SIGINT it receives whatever
its child did, ending the demo with status 130. Without a controlling terminal the command simply runs.

    python tools/build/foreground.py COMMAND [ARG...]
"""
from __future__ import annotations

import os
import signal
import sys


def main() -> int:
    command = sys.argv[1:]
    if not command:
        print("usage: foreground.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    try:
        terminal = os.open("/dev/tty", os.O_RDWR)
        before = os.tcgetpgrp(terminal)
    except OSError:  # no controlling terminal (CI, a pipe): nothing to hand over
        os.execvp(command[0], command)
    ready, go = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        os.close(go)
        os.read(ready, 1)  # the terminal is ours: only then start, so no output of ours can stop us
        os.execvp(command[0], command)
    os.close(ready)
    try:
        os.setpgid(pid, pid)
    except PermissionError:
        pass  # the child got there first
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # handing the terminal back from the background is allowed
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ours stays with make's group: a stray one must not end us first
    os.tcsetpgrp(terminal, pid)
    os.write(go, b"x")
    os.close(go)
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        os.tcsetpgrp(terminal, before)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())

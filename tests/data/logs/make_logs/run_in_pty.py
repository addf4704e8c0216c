"""Run a command under a pseudo-terminal and save everything it prints, as a terminal log.

Usage: python run_in_pty.py OUT.log COMMAND [ARG...]

Libraries colour and redraw progress bars only when they see a terminal; this keeps those bytes.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios


def main() -> int:
    out_path, command = sys.argv[1], sys.argv[2:]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40")
    child = subprocess.Popen(
        command, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    with open(out_path, "wb") as out:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            out.write(data)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())

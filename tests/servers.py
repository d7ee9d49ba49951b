"""Helpers for tests that start a server as a subprocess: a free loopback port, waiting until
it answers, stopping it."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(proc: subprocess.Popen, ready, *, name: str, log: Path, timeout_s: float,
                  errors: tuple[type[BaseException], ...] = (OSError,)) -> None:
    """Poll ready() every 0.3 s until it is true (an exception in `errors` counts as not yet);
    fail the test with the tail of `log` if the process exits or timeout_s passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{name} exited: {log.read_text()[-2000:]}")
        try:
            if ready():
                return
        except errors:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{name} did not answer within {timeout_s:.0f} s: "
                        f"{log.read_text()[-2000:]}")
        time.sleep(0.3)


def stop(proc: subprocess.Popen) -> None:
    """terminate(), then kill() if it is still running 15 s later."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

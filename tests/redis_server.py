"""A throwaway Redis server for the tests (the grading queue's broker): listening on 127.0.0.1
only, no persistence, its files in a temporary folder, started and stopped by the test that
needs it (`redis_server`). Debian's `redis-server` package (installed by `make system`)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """Start a server; yield its URL; stop it and remove its folder."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server not found: install it (`make system` installs Debian's redis-server)")
    top = Path(tempfile.mkdtemp(prefix="encdec-redis-"))
    port = _free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            str(top),
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
        ],
        stdout=(top / "server.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "redis-server did not start: " + (top / "server.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(top, ignore_errors=True)

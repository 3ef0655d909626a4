"""A throwaway PostgreSQL server for the tests: its own cluster in a temporary folder, listening
on 127.0.0.1 only, started and stopped by the test that needs it (`postgres_server`).

Debian's `postgresql` package (installed by `make system`) provides `initdb` and `pg_ctl`.
PostgreSQL refuses to run as root, so under root the cluster belongs to the package's
`postgres` user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

USER = "encdec"  # the cluster's superuser (trust authentication, 127.0.0.1 only)


def _bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if found is None:
        raise FileNotFoundError(f"{name} not found: install PostgreSQL (`make system` installs Debian's postgresql)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_owner(cmd: list[str], owner: pwd.struct_passwd | None) -> list[str]:
    return cmd if owner is None else ["runuser", "-u", owner.pw_name, "--", *cmd]


def create_database(port: int, name: str) -> str:
    """A new database on the server at ``port``; its SQLAlchemy URL."""
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=port, user=USER, dbname="postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql+psycopg://{USER}@127.0.0.1:{port}/{name}"


@contextlib.contextmanager
def postgres_server() -> Iterator[int]:
    """Start a cluster; yield its port (`create_database` makes databases); stop and remove it."""
    owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
    top = Path(tempfile.mkdtemp(prefix="encdec-pg-"))
    data, port = top / "data", _free_port()
    if owner is not None:
        os.chown(top, owner.pw_uid, owner.pw_gid)
    subprocess.run(
        _as_owner([_bin("initdb"), "-D", str(data), "-U", USER, "-A", "trust", "--no-sync", "-E", "UTF8"], owner),
        check=True,
        capture_output=True,
    )
    options = f"-h 127.0.0.1 -p {port} -k {top} -c fsync=off"
    try:
        subprocess.run(
            _as_owner(
                [_bin("pg_ctl"), "-D", str(data), "-l", str(top / "server.log"), "-o", options, "-w", "start"], owner
            ),
            check=True,
            capture_output=True,
        )
        yield port
    finally:
        subprocess.run(
            _as_owner([_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], owner), capture_output=True
        )
        shutil.rmtree(top, ignore_errors=True)

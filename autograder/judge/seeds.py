"""Seeds of the graded runs' inputs: an HMAC of the student, the assignment and the check under
a course secret that never enters the sandbox.

So a regrade draws the same inputs (reproducible), two students get different ones, and nothing
the kernel can read lets it rebuild them before its code has run on them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path


def load_secret(path: str | os.PathLike) -> bytes:
    """The course secret at ``path``; made (32 random bytes, mode 0600) on first use."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        p.parent.mkdir(parents=True, exist_ok=True)
        # written whole beside it, then linked into place: another process (the feedback service, a
        # queue worker) never reads it half made, and the first to link wins
        tmp = p.with_name(f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_hex(32).encode())
        try:
            os.link(tmp, p)
        except FileExistsError:  # another grader process made it first
            pass
        finally:
            tmp.unlink()
        data = p.read_bytes()
    if len(data.strip()) < 16:
        raise ValueError(f"the course secret {p} is shorter than 16 bytes: delete it to make a new one")
    return data.strip()


def check_seed(secret: bytes, student: str, assignment: str, check_id: str) -> int:
    """The seed of one check's inputs for one student (31 bits, as torch generators take)."""
    msg = "\0".join((assignment, student, check_id)).encode()
    return int.from_bytes(hmac.new(secret, msg, hashlib.sha256).digest()[:4], "big") & 0x7FFFFFFF

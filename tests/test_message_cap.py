"""Every kernel message bounded before the grader allocates it (issue 37, autograder/sandbox/relay.py):
the relay's ZMTP meter cuts a message past the limit before a byte past it is forwarded, and a kernel
that sends one (3 GiB of zero pages as buffers; 4,096 frames of 1 MiB) is stopped, graded with the
reason stated, the cells it did not reach 0, while the grader's peak resident size stays far under
1 GB; honest notebooks keep full marks."""
from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.fixtures import table
from autograder.sandbox import relay
from autograder.sandbox.policy import Limits

ROOT = Path(__file__).resolve().parents[1]
CUT = ["hostile_message_buffers", "hostile_message_frames"]
STOCK_BATCH = [*CUT, "db_pass_all", "kv_pass_all"]  # graded in the session's stock batch (conftest.py)
GREETING = b"\xff" + b"\0" * 8 + b"\x7f" + bytes([3, 1]) + b"NULL".ljust(20, b"\0") + b"\x01" + b"\0" * 31
READY = bytes([relay.COMMAND, 5]) + b"READY"


def frame(body: bytes, more: bool = False) -> bytes:
    flags = relay.MORE if more else 0
    if len(body) > 255:
        return bytes([flags | relay.LONG]) + struct.pack(">Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def message(*bodies: bytes) -> bytes:
    return b"".join(frame(b, more=i < len(bodies) - 1) for i, b in enumerate(bodies))


def fed(meter: relay.Meter, data: bytes, step: int = 7) -> None:
    """Feed in small chunks: a header or a greeting split anywhere must parse the same."""
    for i in range(0, len(data), step):
        meter.feed(data[i:i + step])


def test_the_meter_passes_messages_within_the_limits_however_they_are_split():
    meter = relay.Meter(max_bytes=4096, max_frames=8)
    fed(meter, GREETING + READY + message(b"<IDS|MSG>", b"sig", b"{}", b"{}", b"{}", b"x" * 300)
        + message(b"x" * 4000))
    assert meter.largest == 4000 and meter.size == meter.frames == 0


@pytest.mark.parametrize("data, why", [
    (message(b"a" * 3000, b"b" * 1200), "too_large"),  # no frame past the limit, the message is
    (message(*[b"x"] * 9), "too_many_frames"),
    (bytes([relay.COMMAND | relay.LONG]) + struct.pack(">Q", 1 << 40), "command"),
    (bytes([0x80, 1, 0]), "not_zmtp"),  # a reserved flag
    (bytes([relay.COMMAND | relay.MORE, 1, 0]), "not_zmtp"),
])
def test_the_meter_cuts_before_forwarding_a_byte_past_a_limit(data, why):
    meter = relay.Meter(max_bytes=4096, max_frames=8)
    with pytest.raises(relay.Cut) as cut:
        fed(meter, GREETING + READY + data, step=1)
    assert cut.value.why == why


def test_the_meter_cuts_a_size_announced_past_the_limit_at_its_header():
    """A LONG frame announcing 4 GiB is cut at its ninth header byte, before any of its body."""
    meter = relay.Meter(max_bytes=16 << 20, max_frames=64)
    meter.feed(GREETING)
    header = bytes([relay.MORE | relay.LONG]) + struct.pack(">Q", 4 << 30)
    meter.feed(header[:8])
    with pytest.raises(relay.Cut):
        meter.feed(header[8:])


@pytest.mark.parametrize("greeting", [b"GET / HTTP/1.1\r\n", GREETING[:10] + bytes([2]),
                                      GREETING[:12] + b"PLAIN".ljust(20, b"\0")])
def test_anything_but_zmtp_3_with_the_null_mechanism_is_cut(greeting):
    with pytest.raises(relay.Cut):
        relay.Meter(1 << 20, 64).feed(greeting)


def test_the_limits_leave_room_for_the_largest_honest_message():
    """A cell's code comes back on iopub (execute_input): the message limit is above the intake's
    limit on a notebook's sources (its outputs are dropped at intake)."""
    from autograder.handed_in import LIMITS

    assert Limits.message_mb << 20 > 1.5 * LIMITS.source_bytes


@pytest.mark.grading
@pytest.mark.parametrize("name", CUT)
def test_a_message_past_the_limit_stops_the_kernel_with_the_reason_stated(stock_batch, name):
    row = stock_batch.rows[name]
    assert row.actual == table.grading()[name]["expected_score"] == 4, row
    graded = stock_batch.autograded(name) / "decoder_block" / "decoder_block.ipynb"
    nb = nbformat.read(graded, nbformat.NO_CONVERT)
    stopped = nb.metadata["encdec"]["stopped"]
    assert stopped["key"] == "message_cut" and stopped["channel"] == "iopub"
    assert stopped["why"] == "too_large" and stopped["limit_mb"] == Limits.message_mb
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("ename") == "MessageTooLarge"]
    assert len(errors) == 1 and f"more than {Limits.message_mb} MB" in errors[0]["evalue"]
    assert graded.stat().st_size < 2_000_000


@pytest.mark.grading
def test_honest_notebooks_keep_full_marks_through_the_relay(stock_batch):
    assert stock_batch.rows["db_pass_all"].actual == 11 and stock_batch.rows["kv_pass_all"].actual == 11


@pytest.mark.grading
def test_the_grader_stays_far_under_1_gb(tmp_path):
    """Stock `nbgrader autograde` of the two hostile notebooks: its peak resident size (VmHWM)."""
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_message_cap.py"), "--work", str(tmp_path),
                          "--only-hostile"], capture_output=True, text=True, timeout=900)
    peak = [line for line in run.stdout.splitlines() if line.startswith("peak-mb ")]
    assert run.returncode == 0 and peak, run.stdout[-2000:] + run.stderr[-2000:]
    assert float(peak[0].split()[1]) < 700, run.stdout


@pytest.mark.grading
def test_the_relay_cuts_in_a_kernel_of_this_user(tmp_path):
    """One sandboxed kernel, without nbgrader: the relay is between it and this process (as root, and
    as a plain user, whose launcher enters its own namespaces before the relay's thread starts:
    tests/test_unprivileged.py runs this test as one). An honest request is answered; the message of
    3 GiB of buffers is cut, the kernel is stopped, and the relay's record says why."""
    import asyncio

    from autograder.fixtures.big_messages import BUFFERS
    from autograder.sandbox.kernel import KERNEL_NAME, SandboxKernelManager

    async def run() -> tuple[str, dict | None, bool]:
        km = SandboxKernelManager(kernel_name=KERNEL_NAME, assignment="decoder_block")
        await km.start_kernel(cwd=str(tmp_path))
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=120)
            shown = []
            await kc.execute_interactive("print(6 * 7)", timeout=60,
                                         output_hook=lambda m: shown.append(m["content"].get("text", "")))
            kc.execute(BUFFERS)  # no reply comes: the launcher exits when the relay cuts
            for _ in range(300):
                if not await km.is_alive():
                    break
                await asyncio.sleep(0.1)
            return "".join(shown), km.message_cut(), await km.is_alive()
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    shown, cut, alive = asyncio.run(run())
    assert shown.strip() == "42"
    assert cut is not None and cut["why"] in ("too_large", "too_many_frames") and cut["channel"] == "iopub", cut
    assert not alive

"""Every kernel message bounded before the grader allocates it (issue 37), and all a kernel sends over
time (issue 49; autograder/sandbox/relay.py): the relay's ZMTP meter cuts a message past the limit,
the last messages of a channel past what the grader may hold unread, and a channel the grader does
not read past its budget over the kernel's life, before a byte past it is forwarded. A kernel that
does so (big_messages.MESSAGES: 3 GiB of zero pages as buffers; 4,096 frames of 1 MiB; 64 input
requests of 31 MiB; a million empty messages; ...) is stopped, graded with the reason stated, the
cells it did not reach 0, while the grader's peak resident size stays far under 1 GB; honest
notebooks keep full marks."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
import pytest

from autograder.fixtures import table
from autograder.fixtures.big_messages import MESSAGES, SAMPLE
from autograder.sandbox import relay
from autograder.sandbox.execute import RELAY_CUTS
from autograder.sandbox.policy import Limits

ROOT = Path(__file__).resolve().parents[1]
KINDS = list(MESSAGES) if os.environ.get("ENCDEC_FIXTURES_ALL") == "1" else list(SAMPLE)  # `make test-all`: all
CUT = [f"hostile_message_{kind}" for kind in KINDS]
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


def budget(
    message: int = 4096, frames: int = 8, unread: int = 1 << 20, quiet: int = 1 << 20, values: int = 1 << 20
) -> relay.Budget:
    return relay.Budget(message, frames, unread, quiet, values)


def fed(meter: relay.Meter, data: bytes, step: int = 7) -> None:
    """Feed in small chunks: a header or a greeting split anywhere must parse the same."""
    for i in range(0, len(data), step):
        meter.feed(data[i : i + step])


def test_the_meter_passes_messages_within_the_limits_however_they_are_split():
    meter = relay.Meter(budget())
    fed(meter, GREETING + READY + message(b"<IDS|MSG>", b"sig", b"{}", b"{}", b"{}", b"x" * 300) + message(b"x" * 4000))
    assert meter.largest == 4000 and meter.size == meter.frames == 0


@pytest.mark.parametrize(
    "data, why",
    [
        (message(b"a" * 3000, b"b" * 1200), "too_large"),  # no frame past the limit, the message is
        (message(*[b"x"] * 9), "too_many_frames"),
        (bytes([relay.COMMAND | relay.LONG]) + struct.pack(">Q", 1 << 40), "command"),
        (bytes([0x80, 1, 0]), "not_zmtp"),  # a reserved flag
        (bytes([relay.COMMAND | relay.MORE, 1, 0]), "not_zmtp"),
    ],
)
def test_the_meter_cuts_before_forwarding_a_byte_past_a_limit(data, why):
    meter = relay.Meter(budget())
    with pytest.raises(relay.Cut) as cut:
        fed(meter, GREETING + READY + data, step=1)
    assert cut.value.why == why


def test_the_meter_cuts_a_size_announced_past_the_limit_at_its_header():
    """A LONG frame announcing 4 GiB is cut at its ninth header byte, before any of its body."""
    meter = relay.Meter(budget(16 << 20, 64))
    meter.feed(GREETING)
    header = bytes([relay.MORE | relay.LONG]) + struct.pack(">Q", 4 << 30)
    meter.feed(header[:8])
    with pytest.raises(relay.Cut):
        meter.feed(header[8:])


@pytest.mark.parametrize(
    "greeting", [b"GET / HTTP/1.1\r\n", GREETING[:10] + bytes([2]), GREETING[:12] + b"PLAIN".ljust(20, b"\0")]
)
def test_anything_but_zmtp_3_with_the_null_mechanism_is_cut(greeting):
    with pytest.raises(relay.Cut):
        relay.Meter(budget(1 << 20, 64)).feed(greeting)


def test_the_values_the_grader_would_parse_are_bounded_per_message():
    """Two messages of 60 values each pass a limit of 100 (the count starts again with each message), as
    does text without any; one of 120 is cut before its body is forwarded."""
    meter = relay.Meter(budget(values=100))
    fed(meter, GREETING + READY + message(b"{}," * 30, b"[]") + message(b"{}," * 30) + message(b"x" * 4000))
    with pytest.raises(relay.Cut) as cut:
        fed(meter, message(b"{}," * 60))
    assert cut.value.why == "too_many_values"


def test_the_last_messages_together_are_bounded_however_small_each_is():
    """Two messages of 3,000 bytes fit a window of 8,000; the third is cut at its header, while a
    thousand small messages pass (the window holds the last UNREAD + 1, each frame FRAME_COST more)."""
    meter = relay.Meter(budget(unread=8000))
    fed(meter, GREETING + READY + message(b"s" * 10) * 1000 + message(b"a" * 3000) * 2)
    with pytest.raises(relay.Cut) as cut:
        fed(meter, bytes([relay.LONG]) + struct.pack(">Q", 3000), step=1)
    held = 3 * (3000 + relay.FRAME_COST) + (relay.UNREAD - 2) * (10 + relay.FRAME_COST)  # the window's 17
    assert cut.value.why == "unread" and cut.value.size == held


@pytest.mark.parametrize("channel", relay.QUIET)
def test_a_channel_the_grader_does_not_read_is_bounded_over_the_kernel_s_life(channel):
    """Its budget is one tally for all the channel's connections: small messages on two connections
    add up to the cut; on a channel the grader reads, they never do."""
    tally = relay.Tally(quiet=channel in relay.QUIET)
    first, second = relay.Meter(budget(quiet=4096), tally), relay.Meter(budget(quiet=4096), tally)
    fed(first, GREETING + READY + message(b"x" * 100) * 15)
    with pytest.raises(relay.Cut) as cut:
        fed(second, GREETING + READY + message(b"x" * 100) * 15)
    assert cut.value.why == "quiet" and tally.total > 4096
    read = relay.Meter(budget(quiet=4096), relay.Tally(quiet=False))
    fed(read, GREETING + READY + message(b"x" * 100) * 1000)


def take(s: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        got += s.recv(n - len(got))
    return got


def test_the_heartbeat_may_echo_what_the_grader_sent_for_as_long_as_the_kernel_lives(tmp_path):
    """Through a running relay: 300 pings of 4 KiB, each echoed, pass a budget of 64 KiB (an honest
    kernel answers every ping of a long notebook); 64 KiB more than the pings is cut."""
    info = {"ip": str(tmp_path / "g"), **{f"{c}_port": 10 + i for i, c in enumerate(relay.CHANNELS)}}
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"{tmp_path / 'k'}-{info['hb_port']}")
    listener.listen(1)
    meter = relay.Relay(info, str(tmp_path / "k"), tmp_path, budget(1 << 20, 64, 8 << 20, 64 << 10))
    done: list[relay.Cut] = []
    threading.Thread(target=lambda: done.append(meter.run()), daemon=True).start()
    grader = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    grader.connect(f"{info['ip']}-{info['hb_port']}")
    kernel = listener.accept()[0]
    grader.settimeout(10)
    kernel.settimeout(10)
    grader.sendall(GREETING)
    kernel.sendall(GREETING)
    assert take(kernel, len(GREETING)) == take(grader, len(GREETING)) == GREETING
    ping = message(b"p" * 4096)
    for _ in range(300):
        grader.sendall(ping)
        kernel.sendall(take(kernel, len(ping)))
        assert take(grader, len(ping)) == ping
    assert not done
    kernel.sendall(message(b"x" * 4096) * 20)
    for _ in range(100):
        if done:
            break
        threading.Event().wait(0.1)
    assert done and done[0].why == "quiet" and relay.read_cut(tmp_path)["channel"] == "hb"


def test_a_side_that_does_not_read_holds_back_only_its_own_connection(tmp_path):
    """Through a running relay: the grader leaves shell unread while the kernel writes 4 MiB to it;
    iopub still carries its message, and the kernel's stdin, which the grader never reads either, is
    still metered to its cut (the relay reads a quiet channel whatever the grader takes)."""
    info = {"ip": str(tmp_path / "g"), **{f"{c}_port": 10 + i for i, c in enumerate(relay.CHANNELS)}}
    kernel = {}
    for c in ("shell", "iopub", "stdin"):
        kernel[c] = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        kernel[c].bind(f"{tmp_path / 'k'}-{info[f'{c}_port']}")
        kernel[c].listen(1)
    meter = relay.Relay(info, str(tmp_path / "k"), tmp_path, budget(1 << 20, 64, 8 << 20, 64 << 10))
    done: list[relay.Cut] = []
    threading.Thread(target=lambda: done.append(meter.run()), daemon=True).start()
    ends = {}
    for c in ("shell", "iopub", "stdin"):
        grader = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        grader.connect(f"{info['ip']}-{info[f'{c}_port']}")
        ends[c] = grader, kernel[c].accept()[0]
    shell = ends["shell"][1]
    shell.settimeout(0.2)
    shell.sendall(GREETING)
    stuck = 0
    try:
        for _ in range(64):
            shell.sendall(message(b"s" * 65536))
            stuck += 1
    except TimeoutError:
        pass
    assert stuck < 64  # the relay stopped reading the shell the grader does not read
    grader_iopub, kernel_iopub = ends["iopub"]
    kernel_iopub.sendall(GREETING + message(b"hello"))
    grader_iopub.settimeout(10)
    got = b""
    while not got.endswith(b"hello"):
        got += grader_iopub.recv(4096)
    ends["stdin"][1].sendall(GREETING + message(b"x" * 1000) * 100)  # nobody reads the grader's stdin
    for _ in range(100):
        if done:
            break
        threading.Event().wait(0.1)
    assert done and done[0].why == "quiet" and relay.read_cut(tmp_path)["channel"] == "stdin"


def test_the_limits_leave_room_for_the_largest_honest_message():
    """A cell's code comes back on iopub (execute_input): the message limit is above the intake's
    limit on a notebook's sources (its outputs are dropped at intake)."""
    from autograder.handed_in import LIMITS

    assert Limits.message_mb << 20 > 1.5 * LIMITS.source_bytes


@pytest.mark.grading
@pytest.mark.parametrize("kind", KINDS)
def test_too_much_sent_stops_the_kernel_with_the_reason_stated(stock_batch, kind):
    name, (channel, why) = f"hostile_message_{kind}", MESSAGES[kind][1]
    row = stock_batch.rows[name]
    assert row.actual == table.grading()[name]["expected_score"] == 4, row
    graded = stock_batch.autograded(name) / "decoder_block" / "decoder_block.ipynb"
    nb = nbformat.read(graded, nbformat.NO_CONVERT)
    stopped = nb.metadata["encdec"]["stopped"]
    ename, key, unit, _ = RELAY_CUTS[why]
    limit = {
        "too_large": Limits.message_mb,
        "unread": Limits.unread_mb,
        "quiet": Limits.quiet_kb,
        "too_many_values": Limits.message_values,
    }[why]
    assert (stopped["key"], stopped["channel"], stopped["why"], stopped[unit]) == (key, channel, why, limit)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("ename") == ename]
    assert len(errors) == 1 and f"more than {limit} " in errors[0]["evalue"]
    assert graded.stat().st_size < 2_000_000


@pytest.mark.grading
def test_honest_notebooks_keep_full_marks_through_the_relay(stock_batch):
    assert stock_batch.rows["db_pass_all"].actual == 11 and stock_batch.rows["kv_pass_all"].actual == 13


@pytest.mark.grading
def test_the_grader_stays_far_under_1_gb(tmp_path):
    """Stock `nbgrader autograde` of the two hostile notebooks: its peak resident size (VmHWM)."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_message_cap.py"), "--work", str(tmp_path), "--only-hostile"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    peak = [line for line in run.stdout.splitlines() if line.startswith("peak-mb ")]
    assert run.returncode == 0 and peak, run.stdout[-2000:] + run.stderr[-2000:]
    assert float(peak[0].split()[1]) < 700, run.stdout


@pytest.mark.grading
@pytest.mark.parametrize("kind", ["buffers", "stdin"])
def test_the_relay_cuts_in_a_kernel_of_this_user(tmp_path, kind):
    """One sandboxed kernel, without nbgrader: the relay is between it and this process (as root, and
    as a plain user, whose launcher enters its own namespaces before the relay's thread starts:
    tests/test_unprivileged.py runs this test as one). An honest request is answered; the message of
    3 GiB of buffers, or the first of 64 input requests of 31 MiB on stdin (which this client, like
    nbclient, never reads), is cut, the kernel is stopped, and the relay's record says why."""
    import asyncio

    from autograder.sandbox.kernel import KERNEL_NAME, SandboxKernelManager

    async def run() -> tuple[str, dict | None, bool]:
        km = SandboxKernelManager(kernel_name=KERNEL_NAME, assignment="decoder_block")
        await km.start_kernel(cwd=str(tmp_path))
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=120)
            shown = []
            await kc.execute_interactive(
                "print(6 * 7)", timeout=60, output_hook=lambda m: shown.append(m["content"].get("text", ""))
            )
            kc.execute(MESSAGES[kind][0])  # no reply comes: the launcher exits when the relay cuts
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
    assert cut is not None and (cut["channel"], cut["why"]) == MESSAGES[kind][1], cut
    assert not alive

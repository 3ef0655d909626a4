"""`SandboxedExecute`: nbgrader's execution step, run in the sandbox.

The course's execution step (the root `nbgrader_config.py` lists `GradedExecute`, its subclass): it
tells the kernel manager (kernel.py) which assignment it grades, refuses to start a kernel when the
sandbox cannot start or the grading state or `solutions/` is open to other users of the machine
(`autograder/privacy.py`), enforces a wall-clock limit per notebook on top of nbgrader's limit per cell, keeps the
outputs within a byte budget per cell and one per notebook while they stream in (every message
that changes the notebook counts: streams, display data, display updates, clear_output, errors
and widget messages), and contains a kernel that dies
(`os._exit`, memory limit) or ignores interrupts: the cells that could not run get an error
output (so their tests score zero) and the grading of the notebook goes on, instead of nbgrader
dropping every notebook of the student.
"""

from __future__ import annotations

import ctypes
import json
from time import monotonic

from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer, List, Unicode, default

from autograder import ROOT
from autograder.privacy import refuse_open
from autograder.state import grading_state
from encdec.grading import language

from .kernel import KERNEL_NAME, SandboxKernelManager
from .sandbox import check_available

MAX_DEPTH = 32  # a message nested deeper than this is not measured: it is refused (it costs TOO_DEEP)
TOO_DEEP = 1 << 62


def _text_cost(s: str) -> int:
    """What a string can cost where it is written: its JSON form in the notebook (escapes, one
    indented line per line of text), or its HTML form on the feedback page (``&lt;``, ``&amp;``;
    ANSI colour codes become spans)."""
    return len(json.dumps(s)) + 8 * s.count("\n") + 30 * s.count("\x1b") + 5 * sum(s.count(c) for c in "&<>\"'")


def _measure(content, text=len, item: int = 0, depth: int = 0) -> int:
    """A message's content, cheaply: ``text`` of each string (keys too), ``item`` more per list item, 8
    per other value. ``len``: its characters of text; ``_text_cost``, 2: the bytes it can add to the
    notebook or the feedback page."""
    if isinstance(content, str):
        return text(content)
    if depth > MAX_DEPTH:
        return TOO_DEEP
    if isinstance(content, dict):
        return sum(text(str(k)) + _measure(v, text, item, depth + 1) for k, v in content.items())
    if isinstance(content, (list, tuple)):
        return sum(item + _measure(v, text, item, depth + 1) for v in content)
    return 8


# messages that change the notebook: outputs, display updates, clearing, widget state
CHANGES_NOTEBOOK = frozenset(
    {
        "stream",
        "display_data",
        "execute_result",
        "update_display_data",
        "clear_output",
        "error",
        "comm_open",
        "comm_msg",
        "comm_close",
    }
)
# the relay's reasons (relay.Cut.why) -> the cell's error name, the message key, its limit's field and unit
RELAY_CUTS = {
    "too_large": ("MessageTooLarge", "message_cut", "limit_mb", 20),
    "unread": ("TooMuchUnread", "unread_cut", "limit_mb", 20),
    "quiet": ("TooMuchSent", "quiet_cut", "limit_kb", 10),
    "too_many_values": ("MessageTooLarge", "values_cut", "limit_values", 0),
}
MESSAGE_COST = 200  # the least a message that changes the notebook costs (a flood of empty ones ends too)
OUTPUT_FIELDS = 64  # what an output adds to its content in the notebook (its type, separators)
ERROR_CHARS, TRACEBACK_LINES = 1000, 20  # an error past the budget is kept (its cell fails), cut to this


def _bounded_error(out: NotebookNode) -> NotebookNode:
    """An error output cut to a bounded size: its name, the start of its message and traceback."""
    trace = out.get("traceback") if isinstance(out.get("traceback"), list) else []
    return NotebookNode(
        output_type="error",
        ename=str(out.get("ename", ""))[:200],
        evalue=str(out.get("evalue", ""))[:ERROR_CHARS],
        traceback=[str(line)[:ERROR_CHARS] for line in trace[:TRACEBACK_LINES]],
    )


def _cap_outputs(cell: NotebookNode, budget: int) -> None:
    """Keep a cell's outputs within `budget` bytes: cut the output that crosses it, drop the rest
    but its errors (cut to a bounded size: a failing cell keeps failing)."""
    kept, used = [], 0
    outputs = cell.get("outputs", [])
    for i, out in enumerate(outputs):
        size = len(json.dumps(out))
        if used + size <= budget:
            kept.append(out)
            used += size
            continue
        if out.get("output_type") == "stream":
            text = out.get("text", "")
            out["text"] = ("".join(text) if isinstance(text, list) else text)[: max(0, budget - used)]
            kept.append(out)
        kept += [_bounded_error(o) for o in outputs[i:] if o.get("output_type") == "error"][:1]
        kept.append(_cut_notice(f"more than {budget} bytes"))
        cell.outputs = kept
        return


def _cut_notice(why: str) -> NotebookNode:
    return NotebookNode(output_type="stream", name="stderr", text=f"\n[output cut by the grader: {why}]\n")


def _error_output(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])


def release_memory() -> None:
    """Give the freed heap back to the system after a kernel (glibc's ``malloc_trim``): messages near the
    limit raise glibc's mmap threshold, so later ones are allocated on the heap and, once freed, kept by
    the grader for the rest of the batch. A C library without it keeps what it keeps."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


class SandboxedExecute(Execute):
    """nbgrader's Execute, run in the sandbox, with a notebook time limit and crash containment."""

    kernel_name = Unicode(KERNEL_NAME, help="Always the sandbox kernel.").tag(config=True)
    notebook_timeout = Integer(600, help="Wall-clock seconds for the whole notebook; cells after it are not run.").tag(
        config=True
    )
    interrupt_grace = Integer(
        10,
        help="Seconds a cell has, after its reply (or after the interrupt that ends its time), to "
        "deliver its last output; a kernel that misses it is stuck and gets killed.",
    ).tag(config=True)
    max_output_bytes = Integer(
        1_000_000, help="Outputs of one cell beyond this size are cut (nbgrader's LimitOutput counts lines only)."
    ).tag(config=True)
    max_notebook_output_bytes = Integer(
        2_000_000,
        help="What all the kernel's messages that change the notebook may add to it, together: "
        "streams, display data, display updates (of any cell's display), clear_output, errors "
        "and widget messages, each at least MESSAGE_COST bytes, a display update once per "
        "output it rewrites. Past it such messages are dropped on arrival (an error is kept, cut).",
    ).tag(config=True)

    private_folders = List(
        Unicode(),
        help="What the course keeps back from students (the grading state, solutions/): no kernel "
        "starts while one is open to other users of the machine (autograder/privacy.py).",
    ).tag(config=True)

    @default("private_folders")
    def _private_folders_default(self):
        return [str(grading_state().root), str(ROOT / "solutions")]

    def __init__(self, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(**kwargs)

    @default("iopub_timeout")
    def _iopub_timeout_default(self):
        return self.interrupt_grace

    @default("shutdown_kernel")
    def _shutdown_kernel_default(self):
        return "immediate"  # nothing of a graded kernel outlives it: no exit of its own to wait for

    def preprocess(self, nb, resources=None, km=None):
        refuse_open(self.private_folders)
        check_available()
        # the kernel sees this assignment's grading edition (create_kernel_manager hands it on)
        self._assignment = ((resources or {}).get("nbgrader") or {}).get("assignment") or ""
        self.kernel_name = KERNEL_NAME
        self._deadline = monotonic() + self.notebook_timeout
        self._stopped: str | None = None
        self.reset_output_budget()
        try:
            return super().preprocess(nb, resources, km)
        finally:
            release_memory()

    def reset_output_budget(self) -> None:
        """A fresh notebook: nothing charged yet."""
        self._output_bytes: dict[int, int] = {}  # cell -> bytes charged to it
        self._notebook_bytes = 0  # bytes charged to the whole notebook
        self._cut_noticed: set[int] = set()
        self._error_kept: set[int] = set()
        self._displays: dict[str, dict[int, int]] = {}  # display id -> cell -> its outputs there

    def output(self, outs, msg, display_id, cell_index):
        """nbclient's, counting the outputs of each display id that a display update rewrites."""
        out = super().output(outs, msg, display_id, cell_index)
        if display_id and out is not None:
            cells = self._displays.setdefault(display_id, {})
            cells[cell_index] = cells.get(cell_index, 0) + 1
        return out

    def clear_display_id_mapping(self, cell_index: int) -> None:
        super().clear_display_id_mapping(cell_index)
        for cells in self._displays.values():
            cells.pop(cell_index, None)

    def process_message(self, msg, cell, cell_index):
        """Charge every message that changes the notebook to its cell's and the notebook's budget
        *as it arrives*, before nbclient applies it.

        nbclient appends an output per message and rewrites, for a display update, every output
        of that display id in any earlier cell; a kernel that sends hundreds of MB would pile them
        up in the grader's memory and in the autograded notebook. A display update costs its size
        once per output it rewrites. Past a budget the message is dropped (an error is kept, cut
        to a bounded size, once per cell) and one line in the cell says so.
        """
        msg_type = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
        if msg_type not in CHANGES_NOTEBOOK:
            return super().process_message(msg, cell, cell_index)
        content = msg.get("content") if isinstance(msg.get("content"), dict) else {}
        transient = content.get("transient") if isinstance(content.get("transient"), dict) else {}
        display_id = transient.get("display_id")
        rewrites = sum(self._displays.get(display_id, {}).values()) if display_id else 0
        copies = rewrites + (msg_type != "update_display_data")
        cell_left = self.max_output_bytes - self._output_bytes.get(cell_index, 0)
        notebook_left = self.max_notebook_output_bytes - self._notebook_bytes
        chars, raw = _measure(content), sum(len(b) for b in msg.get("buffers") or ())
        cost = None  # the cheap count first: only a message that may fit is measured exactly
        if (chars + raw) * max(1, copies) <= min(cell_left, notebook_left):
            cost = max(MESSAGE_COST, (OUTPUT_FIELDS + _measure(content, _text_cost, 2) + 2 * raw) * max(1, copies))
        if cost is not None and cost <= min(cell_left, notebook_left):
            self._output_bytes[cell_index] = self._output_bytes.get(cell_index, 0) + cost
            self._notebook_bytes += cost
            return super().process_message(msg, cell, cell_index)
        if msg_type == "error" and cell_index not in self._error_kept:  # a failing cell keeps failing
            self._error_kept.add(cell_index)
            msg = {**msg, "content": {**_bounded_error(NotebookNode(content)), "transient": {}}}
            return super().process_message(msg, cell, cell_index)
        if cell_index not in self._cut_noticed:  # the first message over a budget: say so once
            self._cut_noticed.add(cell_index)
            budget, whose = (
                (self.max_notebook_output_bytes, "the notebook")
                if notebook_left < cell_left
                else (self.max_output_bytes, "this cell")
            )
            cell.outputs.append(_cut_notice(f"more than {budget} bytes for {whose}"))
        return None

    def settle_outputs(self, cell, index: int) -> None:
        """After a cell: what reached its outputs without a message charged for it (nbgrader adds
        the reply's error when the kernel sent none) is charged too, and the outputs are cut to
        what the cell's and the notebook's budgets leave."""
        charged = self._output_bytes.get(index, 0)
        left = max(0, self.max_notebook_output_bytes - self._notebook_bytes)
        _cap_outputs(cell, min(self.max_output_bytes, charged + left))
        self._notebook_bytes += max(0, len(json.dumps(cell.get("outputs", []))) - charged)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        km.assignment = getattr(self, "_assignment", "")
        return km

    @default("timeout_func")
    def _timeout_func_default(self):
        return self.cell_timeout

    def cell_timeout(self, cell) -> int:
        """nbclient's per-cell timeout (its ``timeout_func``): the cell's limit, or what is left of the
        notebook's time when that is less."""
        left = max(1, int(self._deadline - monotonic()) + 1)
        return left if not self.timeout or self.timeout < 0 else min(self.timeout, left)

    def preprocess_cell(self, cell, resources, index):
        runs = cell.cell_type == "code" and cell.source.strip()
        if runs and self._stopped is None and monotonic() > self._deadline:
            self._stopped = f"the notebook ran out of time ({self.notebook_timeout} s for all cells)"
        if runs and self._stopped is not None:
            cell.outputs = [_error_output("CellNotRun", f"not run: {self._stopped}")]
            return cell, self.resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
            self.settle_outputs(cell, index)
            return cell, resources
        except DeadKernelError:
            cut = self.km.message_cut() if isinstance(self.km, SandboxKernelManager) else None
            if cut is not None:  # the relay stopped it: a message past the limit (relay.py)
                ename, self._stopped = self._message_cut(cut)
                cell.outputs.append(_error_output(ename, self._stopped))
            else:
                self._stopped = (
                    "the kernel died in an earlier cell (os._exit, a crash, or the memory, "
                    "CPU or process limit of the grading sandbox)"
                )
                cell.outputs.append(_error_output("DeadKernelError", "the kernel died while running this cell"))
        except CellTimeoutError:
            self._stopped = "an earlier cell ignored the interrupt after its time limit; kernel stopped"
            cell.outputs.append(
                _error_output("CellTimeoutError", "this cell exceeded its time limit and ignored the interrupt")
            )
            self._kill_kernel()
        if monotonic() > self._deadline and self._stopped is None:
            self._stopped = f"the notebook ran out of time ({self.notebook_timeout} s for all cells)"
        return cell, self.resources

    def _message_cut(self, cut: dict) -> tuple[str, str]:
        """The relay's record of a cut, as (error name, words in the submission's language); also kept in
        the notebook's metadata (``encdec.stopped``: the key and its parameters) for the tests and the report."""
        why = str(cut.get("why", ""))[:32]
        ename, key, unit, shift = RELAY_CUTS.get(why, RELAY_CUTS["too_large"])
        params = {
            unit: int(cut.get("limit_bytes", 0)) >> shift,
            "limit_frames": int(cut.get("limit_frames", 0)),
            "channel": str(cut.get("channel", ""))[:16],
        }
        meta = self.nb.metadata.setdefault("encdec", {})
        meta["stopped"] = {"key": key, **params, "why": why}
        with language.speaking(meta.get("language") or language.DEFAULT):
            return ename, language.text(key, **params)

    def _kill_kernel(self) -> None:
        if self.km is not None and self.km.has_kernel:
            try:
                run_sync(self.km.shutdown_kernel)(now=True)
            except Exception as err:
                self.log.warning("could not stop the sandboxed kernel: %s", err)

"""`SandboxedExecute`: nbgrader's execution step, run in the sandbox.

It replaces nbgrader's `Execute` preprocessor (nbgrader_sandbox.py swaps it in): it tells the
kernel manager (kernel.py) which assignment it grades, refuses to run when the sandbox cannot
start, enforces a wall-clock limit per notebook on top of nbgrader's limit per cell, keeps a
cell's outputs within a byte budget while they stream in, and contains a kernel that dies
(`os._exit`, memory limit) or ignores interrupts: the cells that could not run get an error
output (so their tests score zero) and the grading of the notebook goes on, instead of nbgrader
dropping every notebook of the student.
"""
from __future__ import annotations

import json
from time import monotonic

from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer, Unicode, default

from .kernel import KERNEL_NAME, SandboxKernelManager
from .sandbox import check_available


def _content_size(content, depth: int = 0) -> int:
    """Bytes of text in a message's content (strings, nested in dicts and lists), cheaply."""
    if isinstance(content, str):
        return len(content)
    if depth > 8:
        return 0
    if isinstance(content, dict):
        return sum(len(str(k)) + _content_size(v, depth + 1) for k, v in content.items())
    if isinstance(content, (list, tuple)):
        return sum(_content_size(v, depth + 1) for v in content)
    return 8


def _cap_outputs(cell: NotebookNode, budget: int) -> None:
    """Keep a cell's outputs within `budget` bytes: cut the output that crosses it, drop the rest."""
    kept, used = [], 0
    for out in cell.get("outputs", []):
        size = len(json.dumps(out))
        if used + size <= budget:
            kept.append(out)
            used += size
            continue
        if out.get("output_type") == "stream":
            text = out.get("text", "")
            out["text"] = ("".join(text) if isinstance(text, list) else text)[:max(0, budget - used)]
            kept.append(out)
        kept.append(NotebookNode(output_type="stream", name="stderr",
                                 text=f"\n[output cut by the grader: more than {budget} bytes]\n"))
        cell.outputs = kept
        return


def _error_output(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message,
                        traceback=[f"{ename}: {message}"])


class SandboxedExecute(Execute):
    """nbgrader's Execute, run in the sandbox, with a notebook time limit and crash containment."""

    kernel_name = Unicode(KERNEL_NAME, help="Always the sandbox kernel.").tag(config=True)
    notebook_timeout = Integer(
        600, help="Wall-clock seconds for the whole notebook; cells after it are not run."
    ).tag(config=True)
    interrupt_grace = Integer(
        10, help="Seconds a cell has, after its reply (or after the interrupt that ends its time), to "
                 "deliver its last output; a kernel that misses it is stuck and gets killed."
    ).tag(config=True)
    max_output_bytes = Integer(
        1_000_000, help="Outputs of one cell beyond this size are cut (nbgrader's LimitOutput counts lines only)."
    ).tag(config=True)

    def __init__(self, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(**kwargs)

    @default("iopub_timeout")
    def _iopub_timeout_default(self):
        return self.interrupt_grace

    def preprocess(self, nb, resources=None, km=None):
        check_available()
        # the kernel sees this assignment's grading edition (create_kernel_manager hands it on)
        self._assignment = ((resources or {}).get("nbgrader") or {}).get("assignment") or ""
        self.kernel_name = KERNEL_NAME
        self._deadline = monotonic() + self.notebook_timeout
        self._stopped: str | None = None
        self._output_bytes: dict[int, int] = {}
        return super().preprocess(nb, resources, km)

    def output(self, outs, msg, display_id, cell_index):
        """Keep at most `max_output_bytes` of a cell's outputs *while* they stream in.

        nbclient appends every output message to the cell as it arrives; a kernel that prints
        hundreds of MB would pile them up in the grader's memory before any cap after the cell.
        Past the budget each message is dropped on arrival, and one line says so.
        """
        used = self._output_bytes.get(cell_index, 0)
        size = _content_size(msg.get("content", {}))
        if used + size > self.max_output_bytes:
            if used <= self.max_output_bytes:  # the first message over the budget: say so once
                outs.append(NotebookNode(output_type="stream", name="stderr",
                                         text=f"\n[output cut by the grader: more than {self.max_output_bytes} bytes]\n"))
            self._output_bytes[cell_index] = self.max_output_bytes + 1
            return None
        self._output_bytes[cell_index] = used + size
        return super().output(outs, msg, display_id, cell_index)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        km.assignment = getattr(self, "_assignment", "")
        return km

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        left = max(1, int(self._deadline - monotonic()) + 1)
        return left if timeout is None else min(timeout, left)

    def preprocess_cell(self, cell, resources, index):
        runs = cell.cell_type == "code" and cell.source.strip()
        if runs and self._stopped is None and monotonic() > self._deadline:
            self._stopped = f"the notebook ran out of time ({self.notebook_timeout} s for all cells)"
        if runs and self._stopped is not None:
            cell.outputs = [_error_output("CellNotRun", f"not run: {self._stopped}")]
            return cell, self.resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
            _cap_outputs(cell, self.max_output_bytes)
            return cell, resources
        except DeadKernelError:
            self._stopped = ("the kernel died in an earlier cell (os._exit, a crash, or the memory, "
                             "CPU or process limit of the grading sandbox)")
            cell.outputs.append(_error_output("DeadKernelError",
                                              "the kernel died while running this cell"))
        except CellTimeoutError:
            self._stopped = "an earlier cell ignored the interrupt after its time limit; kernel stopped"
            cell.outputs.append(_error_output(
                "CellTimeoutError", "this cell exceeded its time limit and ignored the interrupt"))
            self._kill_kernel()
        if monotonic() > self._deadline and self._stopped is None:
            self._stopped = f"the notebook ran out of time ({self.notebook_timeout} s for all cells)"
        return cell, self.resources

    def _kill_kernel(self) -> None:
        if self.km is not None and self.km.has_kernel:
            try:
                run_sync(self.km.shutdown_kernel)(now=True)
            except Exception as err:  # noqa: BLE001 - the notebook is graded either way
                self.log.warning("could not stop the sandboxed kernel: %s", err)


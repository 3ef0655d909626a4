"""``GradedExecute`` (the sandboxed execution step): just before a graded test cell runs, it draws
the inputs of the checks the cell calls, from a seed only the grader can compute (an HMAC of the
student, the assignment and the check under the course secret, ``judge.seeds``), and writes them
into the kernel's folder (its scratch copy, ``SandboxKernelManager.kernel_dir``, never nbgrader's
folder); right after the cell it takes the outputs the kernel saved into the grader's memory and
removes the inputs, never following a link the kernel planted (``sandbox.safefs``). So the kernel
cannot know the inputs before its code runs on them, and nothing it does later changes what it
answered."""
from __future__ import annotations

import re
import secrets
from pathlib import Path

from autograder.sandbox.execute import SandboxedExecute
from ._shared import OUTPUTS_KEY, check_ids, deliver, graded_inputs, withdraw, workdir


class GradedExecute(SandboxedExecute):
    """The sandboxed execution step, handing each graded test cell its inputs just in time."""

    def preprocess_cell(self, cell, resources, index):
        from autograder import judge

        ids = [i for i in check_ids(cell) if i in judge.CHECKS]
        workdir = self._kernel_folder(resources)
        # A hidden check runs under a one-time name: neither its id nor its code enters the kernel.
        names = {i: f"check_{secrets.token_hex(8)}" if judge.CHECKS[i].hidden else i for i in ids}
        for check_id in ids:
            self._hand_over(workdir, names[check_id], check_id, graded_inputs(self, resources, check_id))
        source = cell.source
        if any(names[i] != i for i in ids):
            cell.source = _as_run(source, names)
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        finally:
            cell.source = source
        outputs = resources.setdefault("nbgrader", {}).setdefault(OUTPUTS_KEY, {})
        for check_id in ids:
            outputs[check_id] = withdraw(workdir, names[check_id]) if workdir is not None else None
        return cell, resources

    def _hand_over(self, workdir: Path | None, name: str, check_id: str, inputs: dict) -> None:
        """Write a check's inputs into the kernel's folder under ``name``; a folder the kernel
        replaced by something else (or no kernel) leaves the check without inputs: it scores 0."""
        from autograder import judge

        try:
            if workdir is None:
                raise FileNotFoundError("no kernel is running")
            deliver(workdir, name, judge.wire_bytes(check_id, inputs))
        except OSError as err:
            self.log.warning("could not hand %s its inputs (%s); it scores 0", check_id, err)

    def _kernel_folder(self, resources: dict) -> Path | None:
        """Where the kernel works, as the grader reaches it: the sandbox's scratch folder (None
        once its kernel is gone), not nbgrader's folder, which the kernel never sees."""
        km = getattr(self, "km", None)
        if km is not None and hasattr(km, "kernel_dir"):
            return km.kernel_dir
        return workdir(resources)


def _as_run(source: str, names: dict[str, str]) -> str:
    """A test cell's source as the kernel runs it: comments dropped, hidden ids renamed."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith("#")]
    for check_id, name in names.items():
        lines = [re.sub(rf"""(["']){re.escape(check_id)}\1""", f'"{name}"', line) for line in lines]
    return "\n".join(lines)

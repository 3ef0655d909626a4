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
        if len(ids) == 1 and judge.CHECKS[ids[0]].runs:
            return self._measured_runs(cell, resources, index, ids[0])
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

    def _measured_runs(self, cell, resources, index, check_id: str):
        """A check judged by cost (``Check.runs``): the cell runs once per run, each on its own
        inputs under a one-time name, and the kernel's CPU time around each run is read from
        outside the kernel (``SandboxKernelManager.cpu_time_used``)."""
        inputs = graded_inputs(self, resources, check_id)["runs"]
        results: dict[str, dict] = {}
        source = cell.source
        try:
            for run, run_inputs in inputs.items():
                name = f"check_{secrets.token_hex(8)}"
                self._hand_over(self._kernel_folder(resources), name, check_id, run_inputs)
                cell.source = _as_run(source, {check_id: name})
                before = self._cpu()
                cell, resources = super().preprocess_cell(cell, resources, index)
                after = self._cpu()
                cpu = None if before is None or after is None else max(0.0, after - before)
                workdir = self._kernel_folder(resources)
                results[run] = {"saved": withdraw(workdir, name) if workdir is not None else None, "cpu": cpu}
                self.log.info("%s, run %r: %s s of CPU time in the kernel", check_id, run,
                              "unknown" if cpu is None else f"{cpu:.3f}")
        finally:
            cell.source = source
        resources.setdefault("nbgrader", {}).setdefault(OUTPUTS_KEY, {})[check_id] = results
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

    def _cpu(self) -> float | None:
        km = getattr(self, "km", None)
        try:
            return km.cpu_time_used() if km is not None and hasattr(km, "cpu_time_used") else None
        except OSError:
            return None

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

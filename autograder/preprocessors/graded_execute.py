"""``GradedExecute`` (the sandboxed execution step): just before a graded test cell runs, it draws
the inputs of the checks the cell calls, from a seed only the grader can compute (an HMAC of the
student, the assignment and the check under the course secret, ``judge.seeds``), and writes them
into the kernel's folder (its scratch copy, ``SandboxKernelManager.kernel_dir``, never nbgrader's
folder); right after the cell it takes the outputs the kernel saved into the grader's memory and
removes the inputs, never following a link the kernel planted (``sandbox.safefs``). So the kernel
cannot know the inputs before its code runs on them, and nothing it does later changes what it
answered. A check judged by cost (the kv_cache structure items) runs its cell once per run, and the
kernel's CPU time around each run is read from outside it (``_measured_runs``)."""

from __future__ import annotations

import re
import secrets
import threading
from pathlib import Path

import zmq

from autograder.sandbox.execute import SandboxedExecute
from autograder.sandbox.kernel import SandboxKernelManager

from ._shared import OUTPUTS_KEY, check_ids, deliver, graded_inputs, withdraw, workdir

LESSONS_KEY = "encdec_lesson_cpu"  # in resources["nbgrader"]: the lesson's CPU time per run size


class GradedExecute(SandboxedExecute):
    """The sandboxed execution step, handing each graded test cell its inputs just in time."""

    def preprocess_cell(self, cell, resources, index):
        from autograder import judge

        found = {i: c for i in check_ids(cell, resources) if (c := judge.find(i))}
        ids = list(found)
        if len(ids) == 1 and found[ids[0]].runs:
            return self._measured_runs(cell, resources, index, found[ids[0]])
        workdir = self._kernel_folder(resources)
        # A hidden check runs under a one-time name: neither its id nor its code enters the kernel.
        names = {i: f"check_{secrets.token_hex(8)}" if found[i].hidden else i for i in ids}
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

    def _measured_runs(self, cell, resources, index, check):
        """A check judged by cost (``Check.runs``): the cell runs once per run, each on its own inputs
        under a one-time name. Just before, the grader times the package's own structure on them
        (its bound, ``judge.budget``); the kernel's CPU time around the run is read from outside it,
        before its inputs exist and after its outputs are taken, and past the bound it is interrupted."""
        from autograder.judge import budget

        results: dict[str, dict] = {}
        source = cell.source
        try:
            timed = resources.setdefault("nbgrader", {}).setdefault(LESSONS_KEY, {})
            for part, inputs in graded_inputs(self, resources, check.id)["runs"].items():
                # the lesson's cost on runs of these sizes, one timing a notebook (its visible and
                # hidden items' runs have the same sizes: the cost is the sizes', EOS never chosen),
                # made in the last minute by this grader (budget.FRESH)
                sizes = (check.lesson.__qualname__, part, tuple(sorted(inputs["dims"].items())))
                if sizes not in timed:
                    timed[sizes] = budget.lesson_cpu(check, inputs, key=sizes)
                lesson = timed[sizes]
                limit, name = budget.bound(lesson, part), f"check_{secrets.token_hex(8)}"
                before = self._cpu()
                self._hand_over(self._kernel_folder(resources), name, check.id, inputs)
                cell.source = _as_run(source, {check.id: name})
                done = threading.Event()
                watch = threading.Thread(target=self._watch, args=(before, limit, done), daemon=True)
                watch.start()
                try:
                    cell, resources = super().preprocess_cell(cell, resources, index)
                finally:
                    done.set()
                    watch.join()
                workdir = self._kernel_folder(resources)
                saved = withdraw(workdir, name) if workdir is not None else None
                after = self._cpu()
                cpu = None if before is None or after is None else after - before
                results[part] = {"saved": saved, "cpu": cpu, "lesson": lesson, "bound": limit}
                self.log.info(
                    "%s, run %r: %s s of CPU time in the kernel, bound %.3f s (the lesson's %.3f s)",
                    check.id,
                    part,
                    "unknown" if cpu is None else f"{cpu:.3f}",
                    limit,
                    lesson,
                )
        finally:
            cell.source = source
        resources.setdefault("nbgrader", {}).setdefault(OUTPUTS_KEY, {})[check.id] = results
        return cell, resources

    def _cpu(self) -> float | None:
        """CPU seconds the kernel has used, read outside it (its cgroup's, else its launcher's process
        tree's: ``SandboxProvisioner.cpu_seconds``); None when neither can be read."""
        km = getattr(self, "km", None)
        return km.kernel_cpu_seconds() if isinstance(km, SandboxKernelManager) else None

    def _watch(self, start: float | None, limit: float, done: threading.Event) -> None:
        """Interrupt the kernel once it has used ``limit`` CPU seconds since ``start``: the run is over
        its bound already, and an uncached loop must not eat the notebook's time."""
        while start is not None and not done.wait(0.02):
            used = self._cpu()
            if used is not None and used - start > limit:
                try:  # an interrupt request on a socket of this thread's own (the client's belong to the cell's)
                    info = self.km.get_connection_info()
                    with zmq.Context.instance().socket(zmq.DEALER) as sock:
                        sock.linger = 1000
                        sock.connect(f"{info['transport']}://{info['ip']}-{info['control_port']}")
                        self.km.session.send(sock, "interrupt_request", {})
                except Exception as err:
                    self.log.warning("could not interrupt the kernel at its CPU bound: %s", err)
                return

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

"""The grading sandbox in nbgrader's configuration: every notebook `nbgrader autograde` executes
runs in the sandbox (sandbox.py says what the kernel can see and do).

The root nbgrader_config.py calls `sandbox_grading(c)` last, so it applies to stock nbgrader run
from the repository root, to the formgrader and to `python -m autograder.driver` alike.
Limits can be changed after that call, e.g. in nbgrader_config.py:

    c.SandboxKernelManager.memory_mb = 6144      # address space of one kernel
    c.SandboxedExecute.timeout = 60              # seconds per cell (nbgrader's Execute.timeout)
    c.SandboxedExecute.notebook_timeout = 600    # seconds per notebook

Kernels are forked from a sandboxed zygote that has imported torch (zygote.py); set the
environment variable ENCDEC_SANDBOX_PREFORK=0 to start a fresh bwrap sandbox per kernel.
Standard library only at import: everything else is imported inside `sandbox_grading`, so that
any failure there stops an autograde instead of letting it run unconfined.
"""

import os
import sys

UNAVAILABLE = "autograder.sandbox.GRADING_SANDBOX_UNAVAILABLE"  # an execution step that cannot be imported


def sandbox_grading(c, autograding: bool | None = None) -> None:
    """Make every execution step of `c.Autograde.autograde_preprocessors` the sandboxed one.

    nbgrader's `Execute` or a subclass of it becomes `SandboxedExecute`, which also contains dead
    and stuck kernels; a step that is sandboxed already (a subclass of `SandboxedExecute`, e.g.
    the course's own) stays as configured. `autograding` (default: the command is `nbgrader
    autograde`) also checks that the sandbox can start, and stops the command if it cannot.
    """
    if autograding is None:
        autograding = len(sys.argv) > 1 and sys.argv[1] == "autograde"
    try:
        from nbgrader.converters.autograde import Autograde
        from nbgrader.preprocessors import Execute
        from traitlets.utils.importstring import import_item

        from autograder.sandbox.execute import SandboxedExecute
        from autograder.sandbox.sandbox import check_available

        current = c.Autograde.get("autograde_preprocessors")
        if not isinstance(current, list):
            current = list(Autograde.class_traits()["autograde_preprocessors"].default_value)
        classes = [import_item(p) if isinstance(p, str) else p for p in current]
        swapped = [
            p if issubclass(k, SandboxedExecute) else SandboxedExecute if issubclass(k, Execute) else p
            for k, p in zip(classes, current)
        ]
        if not any(issubclass(k, SandboxedExecute) for k in classes) and SandboxedExecute not in swapped:
            raise RuntimeError("c.Autograde.autograde_preprocessors has no Execute step to sandbox")
        c.Autograde.autograde_preprocessors = swapped
        c.SandboxKernelManager.prefork = os.environ.get("ENCDEC_SANDBOX_PREFORK", "1") != "0"
        if autograding:
            check_available()
    except Exception as err:
        # traitlets logs errors in config files and carries on without them, which here would mean
        # running student code unconfined: stop instead (SystemExit is not an Exception).
        if autograding:
            raise SystemExit(f"nbgrader autograde: the grading sandbox is not available: {err}") from None
        print(f"warning: grading sandbox not configured ({err}); autograding will refuse to run", file=sys.stderr)
        # Other commands (generate_assignment, validate, the formgrader) go on, but an autograde
        # started from them (the formgrader's button) must fail, not execute unconfined: its
        # execution step becomes a name that cannot be imported.
        steps = c.Autograde.get("autograde_preprocessors")
        if isinstance(steps, list):
            c.Autograde.autograde_preprocessors = [UNAVAILABLE if "Execute" in str(p) else p for p in steps]

# nbgrader configuration fragment: every notebook that `nbgrader autograde` executes runs in the
# grading sandbox (autograder/sandbox/sandbox.py says what the kernel can see and do).
# The root nbgrader_config.py loads this file last, so it applies to stock nbgrader run from the
# repository root, to the formgrader and to `python -m autograder.driver` alike.
#
# Limits can be changed after this file is loaded, e.g. in nbgrader_config.py:
#   c.SandboxKernelManager.memory_mb = 6144      # address space of one kernel
#   c.SandboxedExecute.timeout = 60              # seconds per cell (nbgrader's Execute.timeout)
#   c.SandboxedExecute.notebook_timeout = 600    # seconds per notebook
# Kernels are forked from a sandboxed zygote that has imported torch (zygote.py); set the
# environment variable ENCDEC_SANDBOX_PREFORK=0 to start a fresh bwrap sandbox per kernel.
import os
import sys
from pathlib import Path

try:
    _here = Path(__file__).resolve()  # noqa: F821 - set by the config loader
except NameError:
    _here = Path("nbgrader_config.py").resolve()
_repo = _here.parents[2] if _here.name == "nbgrader_sandbox.py" else _here.parent
_autograding = len(sys.argv) > 1 and sys.argv[1] == "autograde"

try:
    if str(_repo) not in sys.path:
        sys.path.insert(0, str(_repo))
    from autograder.sandbox.kernel import SandboxedExecute
    from autograder.sandbox.sandbox import check_available
    from nbgrader.converters.autograde import Autograde
    from nbgrader.preprocessors import Execute
    from traitlets.utils.importstring import import_item

    _c = get_config()  # noqa: F821 - provided by the traitlets config loader
    _current = _c.Autograde.get("autograde_preprocessors")
    if not isinstance(_current, list):
        _current = list(Autograde.class_traits()["autograde_preprocessors"].default_value)
    # Every execution step (nbgrader's Execute or a subclass of it) becomes the sandboxed one,
    # which also contains dead and stuck kernels; a step that is sandboxed already (a subclass of
    # SandboxedExecute, e.g. the course's own) stays as configured.
    _classes = [import_item(p) if isinstance(p, str) else p for p in _current]
    _swapped = [p if issubclass(k, SandboxedExecute) else SandboxedExecute if issubclass(k, Execute) else p
                for k, p in zip(_classes, _current)]
    if not any(issubclass(k, SandboxedExecute) for k in _classes) and SandboxedExecute not in _swapped:
        raise RuntimeError("c.Autograde.autograde_preprocessors has no Execute step to sandbox")
    _c.Autograde.autograde_preprocessors = _swapped
    _c.SandboxKernelManager.prefork = os.environ.get("ENCDEC_SANDBOX_PREFORK", "1") != "0"
    if _autograding:
        check_available()
except Exception as _err:  # noqa: BLE001
    # traitlets logs errors in config files and carries on without them, which here would mean
    # running student code unconfined: stop instead (SystemExit is not an Exception).
    if _autograding:
        raise SystemExit(f"nbgrader autograde: the grading sandbox is not available: {_err}")
    print(f"warning: grading sandbox not configured ({_err}); autograding will refuse to run", file=sys.stderr)
    # Other commands (generate_assignment, validate, the formgrader) go on, but an autograde
    # started from them (the formgrader's button) must fail, not execute unconfined: its
    # execution step becomes a name that cannot be imported.
    try:
        _steps = get_config().Autograde.get("autograde_preprocessors")  # noqa: F821
        if isinstance(_steps, list):
            get_config().Autograde.autograde_preprocessors = [  # noqa: F821
                "autograder.sandbox.GRADING_SANDBOX_UNAVAILABLE" if "Execute" in str(p) else p for p in _steps]
    except Exception:  # noqa: BLE001
        pass

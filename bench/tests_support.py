"""The tests' browser helpers (tests/browser_support.py) for the benchmarks that drive Chromium,
loaded from their file (tests/ is not a package): `from tests_support import browser_support`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def browser_support(name: str = "browser_support"):
    """tests/browser_support.py (or another helper module of tests/, e.g. book_published) as a module
    (once per process)."""
    if name in sys.modules:
        return sys.modules[name]
    if name != "browser_support":
        browser_support()  # the other helpers import it by name
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module

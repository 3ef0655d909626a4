"""The tests' browser helpers (tests/browser_support.py) for the benchmarks that drive Chromium,
loaded from their file (tests/ is not a package): `from tests_support import browser_support`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def browser_support():
    """tests/browser_support.py as a module (once per process)."""
    if "browser_support" in sys.modules:
        return sys.modules["browser_support"]
    spec = importlib.util.spec_from_file_location("browser_support", ROOT / "tests" / "browser_support.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module

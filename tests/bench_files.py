"""The benchmark's generators (`bench/generate.py`), for tests that need the same
realistic large files: a pi session with planted defects, millions of tiny entries,
one huge line."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from types import ModuleType

from .conftest import ROOT


@cache
def generators() -> ModuleType:
    """`bench/generate.py`, loaded once (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("bench_generate", ROOT / "bench" / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module

"""The benchmark's generators (`bench/generate.py`, `bench/generate_claude.py`,
`bench/generate_codex.py`, `bench/generate_pi.py`), for tests that need the same
realistic large files: a pi session with planted defects, millions of tiny entries, one
huge line, and a Claude Code session, a Codex rollout and a pi session built from the
samples."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from types import ModuleType

from .conftest import ROOT


def _load(name: str) -> ModuleType:
    """`bench/NAME.py`, loaded once (a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@cache
def generators() -> ModuleType:
    """`bench/generate.py`."""
    return _load("generate")


@cache
def claude_generator() -> ModuleType:
    """`bench/generate_claude.py`."""
    return _load("generate_claude")


@cache
def codex_generator() -> ModuleType:
    """`bench/generate_codex.py`."""
    return _load("generate_codex")


@cache
def pi_generator() -> ModuleType:
    """`bench/generate_pi.py`."""
    return _load("generate_pi")

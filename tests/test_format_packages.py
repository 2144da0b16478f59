"""Each format is one package behind one protocol, listed once in the registry."""

from __future__ import annotations

import importlib
from pathlib import Path

from sessionfix import registry
from sessionfix.formats import (
    Format,
    all_formats,
    detect,
    is_sibling_file,
    package_of,
)
from sessionfix.formats.claude import CLAUDE
from sessionfix.formats.codex import CODEX
from sessionfix.formats.pi import PI
from sessionfix.registry import JsonDocuments, JsonlFiles, SqliteStore

PROVIDES = (
    "FORMATS",
    "AGENTS",
    "SUFFIXES",
    "HEADER_START",
    "detect",
    "has_record_shape",
    "make_adapter",
    "capabilities",
    "is_sibling",
    "session_roots",
    "loaded_messages",
    "header_problems",
    "rebuilt_header",
    "writer_lock",
    "CONTAINERS",
)
STORE_PROVIDES = ("CONTAINERS", "is_store", "open_store")
FORMAT_PACKAGES = [
    name for name in registry.PACKAGES if hasattr(importlib.import_module(name), "FORMATS")
]
STORE_PACKAGES = [name for name in registry.PACKAGES if name not in FORMAT_PACKAGES]


def test_every_package_provides_the_protocol() -> None:
    for name in FORMAT_PACKAGES:
        module = importlib.import_module(name)
        missing = [member for member in PROVIDES if not hasattr(module, member)]
        assert not missing, f"{name} lacks {missing}"


def test_every_other_package_reads_stores() -> None:
    assert STORE_PACKAGES
    for name in STORE_PACKAGES:
        module = importlib.import_module(name)
        missing = [member for member in STORE_PROVIDES if not hasattr(module, member)]
        assert not missing, f"{name} lacks {missing}"


def test_each_package_declares_how_its_sessions_are_held() -> None:
    """Session files, or a store of sessions, which its package then opens: a format
    whose sessions are rows of a database (opencode) declares the store it reads."""
    declared = {name: importlib.import_module(name).CONTAINERS for name in registry.PACKAGES}
    for name in FORMAT_PACKAGES:
        kinds = [type(container) for container in declared[name]]
        assert kinds in ([JsonlFiles], [SqliteStore], [JsonDocuments]), name
    for name in STORE_PACKAGES:
        assert [type(container) for container in declared[name]] == [SqliteStore], name
    for name, containers in declared.items():
        if any(isinstance(container, SqliteStore | JsonDocuments) for container in containers):
            module = importlib.import_module(name)
            missing = [member for member in STORE_PROVIDES if not hasattr(module, member)]
            assert not missing, f"{name} lacks {missing}"


def test_the_packages_share_the_formats_out() -> None:
    claimed = [fmt for name in FORMAT_PACKAGES for fmt in importlib.import_module(name).FORMATS]
    assert len(claimed) == len(set(claimed)) == len(all_formats())
    for fmt in claimed:
        assert fmt in package_of(fmt).FORMATS  # type: ignore[attr-defined]


def test_first_records_pick_their_package() -> None:
    assert detect({"type": "session", "id": "s"}) is PI
    assert detect({"type": "message", "id": "a1", "parentId": None}) is PI
    assert detect({"type": "session_meta", "payload": {}}) is CODEX
    assert detect({"type": "user", "uuid": "u", "parentUuid": None}) is CLAUDE
    assert detect({"type": "last-prompt", "lastPrompt": "hi"}) is CLAUDE
    assert detect({"display": "fix the build", "timestamp": 1}) is Format.UNKNOWN


def test_siblings_are_what_the_agents_keep_beside_their_sessions(tmp_path: Path) -> None:
    assert is_sibling_file(tmp_path / "s.jsonl.lock")
    assert is_sibling_file(tmp_path / "s.trajectory.jsonl")
    assert is_sibling_file(tmp_path / ".claude" / "history.jsonl")
    assert is_sibling_file(tmp_path / "wf_1" / "journal.jsonl")
    assert not is_sibling_file(tmp_path / ".claude" / "projects" / "-x" / "s.jsonl")
    assert not is_sibling_file(tmp_path / "session.jsonl")

"""Each format is one package behind one protocol, listed once in the registry."""

from __future__ import annotations

import importlib
from pathlib import Path

from sessionfix.formats import PACKAGES, Format, detect, is_sibling_file, package_of

PROVIDES = (
    "FORMATS",
    "detect",
    "has_record_shape",
    "make_adapter",
    "capabilities",
    "is_sibling",
    "session_roots",
)


def test_every_package_provides_the_protocol() -> None:
    for name in PACKAGES:
        module = importlib.import_module(name)
        missing = [member for member in PROVIDES if not hasattr(module, member)]
        assert not missing, f"{name} lacks {missing}"


def test_the_packages_share_the_formats_out() -> None:
    claimed = [fmt for name in PACKAGES for fmt in importlib.import_module(name).FORMATS]
    assert sorted(f.value for f in claimed) == sorted(
        f.value for f in Format if f is not Format.AUTO
    )
    for fmt in claimed:
        assert fmt in package_of(fmt).FORMATS  # type: ignore[attr-defined]


def test_first_records_pick_their_package() -> None:
    assert detect({"type": "session", "id": "s"}) is Format.PI
    assert detect({"type": "message", "id": "a1", "parentId": None}) is Format.PI
    assert detect({"type": "session_meta", "payload": {}}) is Format.CODEX
    assert detect({"type": "user", "uuid": "u", "parentUuid": None}) is Format.CLAUDE
    assert detect({"type": "last-prompt", "lastPrompt": "hi"}) is Format.CLAUDE
    assert detect({"display": "fix the build", "timestamp": 1}) is Format.UNKNOWN


def test_siblings_are_what_the_agents_keep_beside_their_sessions(tmp_path: Path) -> None:
    assert is_sibling_file(tmp_path / "s.jsonl.lock")
    assert is_sibling_file(tmp_path / "s.trajectory.jsonl")
    assert is_sibling_file(tmp_path / ".claude" / "history.jsonl")
    assert is_sibling_file(tmp_path / "wf_1" / "journal.jsonl")
    assert not is_sibling_file(tmp_path / ".claude" / "projects" / "-x" / "s.jsonl")
    assert not is_sibling_file(tmp_path / "session.jsonl")

"""A format is a package and a registry line: a throw-away format package, written to a
temporary folder and registered with one line, is scanned, checked, repaired, restored
and measured by `context` with nothing else changed."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any, Final

import pytest
from typer.testing import CliRunner

from sessionfix import check_file, registry
from sessionfix.cli import app
from sessionfix.safety import locks
from sessionfix.safety.backups import list_backups

PACKAGE: Final = "sessionfix_toy_format"
"""The throw-away package's module name (outside `sessionfix`, as a plug-in's would be)."""

SOURCE: Final = '''
"""Toy Agent's notes: `~/.toy/logs/*.toylog` (`TOY_HOME` replaces `~/.toy`), one JSON
object per line, the first holding `toy`; Toy Agent locks a log as `<name>.toylock`."""

from pathlib import Path

from sessionfix.formats import Format, WriterLock, configured_folder
from sessionfix.registry import JsonlFiles
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.headerless import HEADER_START, header_problems, rebuilt_header
from sessionfix.formats.opaque import OpaqueAdapter
from sessionfix.model.loaded import Loaded, Sent

TOY = Format("toy")
FORMATS = (TOY,)
AGENTS = {TOY: "Toy Agent"}
SUFFIXES = (".toylog",)
CONTAINERS = (JsonlFiles(),)


def detect(first_record):
    return TOY if "toy" in first_record else None


def has_record_shape(value):
    return "toy" in value


def make_adapter(fmt, path, context, named_as):
    return OpaqueAdapter(path, fmt)


def capabilities(fmt, tree):
    return frozenset({Capability.LINES})


def is_sibling(path):
    return path.name == "toy-history.toylog"


def session_roots(env, home):
    return [configured_folder(env, "TOY_HOME", home, home / ".toy") / "logs"]


def loaded_messages(view, source, lines):
    for index in range(len(view)):
        yield Loaded(index, Sent.USER, view.sizes[index])


def writer_lock(fmt, session):
    always = fmt is TOY or session.name.endswith(SUFFIXES)
    return WriterLock(session.with_name(session.name + ".toylock"), always=always)
'''

NOTES: Final = (
    b'{"toy": "note", "text": "plant the tomatoes"}\r\n'
    b'{"toy": "note", "text": "water them"}\r\n'
    b'{"toy": "note", "text": "pick them"}\r\n'
)
"""A Toy Agent log whose lines end in CRLF: a finding with a safe fix on every line."""
REPAIRED: Final = NOTES.replace(b"\r\n", b"\n")
ENV: Final = {"NO_COLOR": "1", "COLUMNS": "120"}
LONG_AGO: Final = 1_700_000_000


def run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, color=False)


@pytest.fixture
def toy_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy package on the import path, and its one line in the registry."""
    folder = tmp_path / "plugins" / PACKAGE
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(SOURCE))
    monkeypatch.syspath_prepend(str(folder.parent))
    *formats, last = registry.PACKAGES
    monkeypatch.setattr(registry, "PACKAGES", (*formats, PACKAGE, last))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder holding one Toy Agent log (and its prompt history), no other agent's."""
    folder = tmp_path / "home"
    logs = folder / ".toy" / "logs"
    logs.mkdir(parents=True)
    (logs / "garden.toylog").write_bytes(NOTES)
    (logs / "toy-history.toylog").write_bytes(b'{"toy": "prompt"}\r\n')
    os.utime(logs / "garden.toylog", (LONG_AGO, LONG_AGO))
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("TOY_HOME", raising=False)
    return folder


def test_scan_without_paths_finds_the_new_agents_sessions(toy_format: None, home: Path) -> None:
    result = run("scan", "--output-format", "json", "--no-progress")
    found = json.loads(result.stdout)
    assert {d["format"] for d in found} == {"toy"}
    assert {Path(d["filename"]).name for d in found} == {"garden.toylog"}
    assert "~/.toy/logs" in result.stderr


def test_check_and_repair_in_place_then_restore(
    toy_format: None, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = home / ".toy" / "logs" / "garden.toylog"
    lock = log.with_name(log.name + ".toylock")
    locked_while_checked: list[bool] = []
    refuse_busy = locks._refuse_busy

    def watched(session: Path, *args: Any) -> None:
        locked_while_checked.append(lock.exists())
        refuse_busy(session, *args)

    monkeypatch.setattr(locks, "_refuse_busy", watched)
    check = run("check", "--format", "toy", "--output-format", "json", log)
    assert check.exit_code == 0, check.stderr  # CRLF line ends are information
    (finding,) = json.loads(check.stdout)
    assert (finding["format"], finding["fix"]["applicability"]) == ("toy", "safe")

    repair = run("repair", "--in-place", "--quiescence", "0", log)
    assert repair.exit_code == 0, repair.stderr
    assert log.read_bytes() == REPAIRED
    assert locked_while_checked == [True], "the lock the format declares is taken"
    assert not lock.exists(), "and released"
    assert len(list_backups(log)) == 1

    restore = run("restore", "--quiescence", "0", log)
    assert restore.exit_code == 0, restore.stderr
    assert log.read_bytes() == NOTES


def test_a_live_lock_the_format_declares_leaves_the_session_untouched(
    toy_format: None, home: Path
) -> None:
    log = home / ".toy" / "logs" / "garden.toylog"
    lock = log.with_name(log.name + ".toylock")
    lock.write_text(json.dumps({"pid": os.getppid(), "createdAt": "2099-01-01T00:00:00.000Z"}))
    result = run("repair", "--in-place", "--quiescence", "0", log)
    assert result.exit_code == 2, result.stderr
    assert "locked" in result.stderr
    assert log.read_bytes() == NOTES


def test_context_names_the_agent_the_format_declares(toy_format: None, home: Path) -> None:
    log = home / ".toy" / "logs" / "garden.toylog"
    result = run("context", log)
    assert result.exit_code == 0, result.stderr
    assert "Toy Agent loads 3 messages" in result.stdout


def test_a_file_of_no_known_format_is_told_of_the_new_agent_too(
    toy_format: None, tmp_path: Path
) -> None:
    log = tmp_path / "notes.jsonl"
    log.write_bytes(b'{"kind": "note"}\n')
    (finding,) = check_file(log)
    assert finding.message.endswith("no pi, OpenClaw, Codex, Claude Code or Toy Agent record")


def test_an_unregistered_format_is_no_choice(home: Path) -> None:
    result = run("check", "--format", "toy", home / ".toy" / "logs" / "garden.toylog")
    assert result.exit_code == 2
    assert "toy" in result.stderr

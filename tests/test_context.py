"""`sessionfix context`: what the agent loads on resume and where the bytes go, through the
library and the command line. (That the counts are the agents' own is checked against
their loaders in `test_pi_loader.py`, `test_claude_loader.py` and `test_codex_loader.py`.)"""

from __future__ import annotations

import json
from contextlib import chdir
from pathlib import Path
from typing import Any

import pytest
import zstandard
from typer.testing import CliRunner

from sessionfix import Settings, check_file
from sessionfix.cli import app
from sessionfix.containers import SessionFile
from sessionfix.context import IMAGE_TOKENS, Part, context_after_repair, context_of, contexts
from sessionfix.formats import Format
from sessionfix.formats.pi import PI
from sessionfix.model.loaded import Sent
from sessionfix.report.context import bar
from sessionfix.stores import StoredSession

from .conftest import CORPUS, FIXTURES, ROOT

EXAMPLES = ROOT / "examples" / "sessions"
ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
INPUTS = sorted(FIXTURES.glob("*/input.jsonl"))


def run(*args: str | Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["context", *map(str, args)], env=ENV, color=False)


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.parent.name)
def test_every_byte_is_in_one_part(path: Path) -> None:
    context = context_of(path)
    assert sum(context.parts.values()) == path.stat().st_size == context.file_bytes
    assert sum(context.by_sent.values()) == context.messages
    assert context.stale_read_bytes <= context.parts[Part.SENT]
    assert context.image_bytes <= context.message_bytes


def test_stale_reads_are_counted_and_gone_after_repair() -> None:
    path = EXAMPLES / "stale-reads.jsonl"
    now = context_of(path)
    after = context_after_repair(path)
    assert now.stale_reads == 1
    assert now.stale_read_bytes > 0
    assert after.repaired
    assert after.stale_reads == 0
    assert after.messages == now.messages
    assert after.tokens < now.tokens


def test_history_before_the_last_compaction_is_not_sent() -> None:
    context = context_of(CORPUS / "openclaw" / "pi-mono__before-compaction.v1.jsonl")
    assert context.by_sent[Sent.SUMMARY] == 1
    assert context.parts[Part.BEFORE_COMPACTION] > context.parts[Part.SENT]


def test_abandoned_branches_are_their_own_part() -> None:
    context = context_of(FIXTURES / "SF205-mostly-abandoned-branches" / "input.jsonl")
    assert context.parts[Part.OFF_PATH] > context.parts[Part.SENT]


def test_an_inline_image_counts_as_image_tokens() -> None:
    context = context_of(EXAMPLES / "compaction-and-size.jsonl")
    assert context.images == 1
    assert context.image_bytes > 200_000
    text = context.message_bytes - context.image_bytes
    assert context.tokens == text // 4 + IMAGE_TOKENS


def test_a_headerless_pi_file_loads_nothing() -> None:
    assert context_of(EXAMPLES / "headerless-fragment.jsonl").messages == 0


def test_text_report() -> None:
    path = EXAMPLES / "stale-reads.jsonl"
    before = path.read_bytes()
    result = run(path, EXAMPLES / "073bec07-cd99-4bec-9a10-1a6bf21804be.jsonl")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "pi loads 10 messages, about " in out
    assert "1 user · 5 assistant · 4 tool result" in out
    assert "of which 1 stale read " in out
    assert "Claude Code loads 6 messages" in out
    assert "sent to the model" in out
    assert "█" in out
    assert "Tokens are estimated" in out
    assert path.read_bytes() == before


def test_json_report_after_repair() -> None:
    path = EXAMPLES / "stale-reads.jsonl"
    result = run(path, "--after-repair", "--output-format", "json")
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.stdout)
    assert entry["repaired"] is True
    assert entry["now"]["repaired"] is False
    assert entry["now"]["stale_reads"]["count"] == 1
    assert entry["stale_reads"]["count"] == 0
    assert entry["by_role"] == {"user": 1, "assistant": 5, "tool result": 4}
    assert sum(part["bytes"] for part in entry["parts"]) == entry["file_bytes"]
    assert {part["part"] for part in entry["parts"]} == {part.key for part in Part}
    assert entry["tokens"]["estimate"] < entry["now"]["tokens"]["estimate"]


def test_a_file_of_no_known_format() -> None:
    result = run(EXAMPLES / "openclaw-overflow-recovery.trajectory.jsonl")
    assert result.exit_code == 0
    assert "no agent is known to load this file" in result.stdout


def test_an_unreadable_file_is_one_line_and_the_others_are_measured(tmp_path: Path) -> None:
    result = run(tmp_path / "missing.jsonl", EXAMPLES / "stale-reads.jsonl")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "missing.jsonl" in result.stderr
    assert "pi loads 10 messages" in result.stdout


def test_session_text_in_a_file_name_is_escaped(tmp_path: Path) -> None:
    path = tmp_path / "a\x1b[31mred.jsonl"
    path.write_bytes((EXAMPLES / "stale-reads.jsonl").read_bytes())
    result = run(path)
    assert result.exit_code == 0
    assert "\x1b" not in result.stdout


def test_a_store_session_named_for_a_plain_file_is_an_error() -> None:
    """`--session` picks a session of a store; naming one for a file alone is refused
    as check refuses it, not silently ignored."""
    result = run("--session", "nope", EXAMPLES / "stale-reads.jsonl")
    assert result.exit_code == 2
    assert "no session 'nope' in any session store read" in result.stderr


@pytest.mark.parametrize(
    ("share", "drawn"), [(0.0, ""), (1.0, "█" * 24), (0.5, "█" * 12), (1 / 48, "▌")]
)
def test_bars(share: float, drawn: str) -> None:
    assert bar(share) == drawn


def test_history_a_claude_compaction_cut_off_is_before_it() -> None:
    """A Claude boundary has no parent: what it cut off is reached by its
    `logicalParentUuid`, not by the chain."""
    context = context_of(CORPUS / "claude" / "entireio-cli" / "a6-e4c2a0fbd1-0.full.jsonl")
    assert context.by_sent[Sent.SUMMARY] == 1
    assert context.parts[Part.BEFORE_COMPACTION] > 100_000
    assert context.parts[Part.OFF_PATH] == 0


@pytest.mark.parametrize(
    ("case", "why"),
    [("SF105-two-entry-cycle", "pi hangs"), ("SF008-json-null-line", "pi throws")],
)
def test_a_session_pi_does_not_load_says_why(case: str, why: str) -> None:
    context = context_of(FIXTURES / case / "input.jsonl")
    assert context.refused is not None
    assert context.refused.startswith(why)
    assert context.messages == 0
    assert context.parts[Part.SENT] == 0
    result = run(FIXTURES / case / "input.jsonl")
    assert f"{why}" in result.stdout
    assert "it loads nothing" in result.stdout


def test_records_on_lines_pi_cannot_read_are_not_sent() -> None:
    """pi drops a glued line and the chain breaks there: only what follows is sent."""
    context = context_of(EXAMPLES / "torn-and-glued.jsonl")
    assert context.messages == 1
    assert context.parts[Part.UNREAD] > context.parts[Part.SENT]


def test_after_repair_reads_the_copy_as_the_sessions_format(tmp_path: Path) -> None:
    """An OpenClaw session told by its folder stays OpenClaw's in the repaired copy,
    which is written elsewhere."""
    folder = tmp_path / ".openclaw" / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    path = folder / "0f3c2b1a-7d6e-4c5b-9a8f-112233445566.jsonl"
    path.write_bytes((EXAMPLES / "openclaw-overflow-recovery.jsonl").read_bytes())
    now = context_of(path)
    after = context_after_repair(path)
    assert now.format == after.format == "openclaw"
    assert (now.messages, after.messages) == (7, 5)


@pytest.mark.parametrize("fmt", [Format.AUTO, PI])
def test_after_repair_the_copy_reads_as_lying_where_the_session_lies(
    tmp_path: Path, fmt: Format
) -> None:
    """The repaired copy is written to a private folder, yet measured as the session it
    stands for: a session in an OpenClaw sessions folder stays OpenClaw's."""
    folder = tmp_path / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    session = folder / "s.jsonl"
    session.write_bytes((FIXTURES / "SF001-glued-assistant-and-user" / "input.jsonl").read_bytes())
    settings = Settings(format=fmt, quiescence=0.0)
    before = context_of(session, settings)
    after = context_after_repair(session, settings)
    assert before.format == after.format == "openclaw"


def test_a_link_to_a_session_reads_as_lying_where_the_session_lies(tmp_path: Path) -> None:
    """Named by a relative or an absolute path, plain or compressed, a link to a session
    in an OpenClaw sessions folder reads as OpenClaw's."""
    folder = tmp_path / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    data = (FIXTURES / "SF001-glued-assistant-and-user" / "input.jsonl").read_bytes()
    (folder / "s.jsonl").write_bytes(data)
    (folder / "p.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(data))
    (tmp_path / "link.jsonl").symlink_to(folder / "s.jsonl")
    (tmp_path / "plink.jsonl.zst").symlink_to(folder / "p.jsonl.zst")
    settings = Settings(quiescence=0.0)
    for name in ("link.jsonl", "plink.jsonl.zst"):
        assert {d.format for d in check_file(tmp_path / name, settings)} == {"openclaw"}
        with chdir(tmp_path):
            assert {d.format for d in check_file(Path(name), settings)} == {"openclaw"}


def test_each_session_is_read_through_its_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`context` holds a session file, plain or compressed, as its container holds it for
    a check, and measures it as it measures the file itself."""
    data = (EXAMPLES / "stale-reads.jsonl").read_bytes()
    plain, packed = tmp_path / "s.jsonl", tmp_path / "p.jsonl.zst"
    plain.write_bytes(data)
    packed.write_bytes(zstandard.ZstdCompressor().compress(data))
    held: list[Path] = []
    hold = SessionFile.hold

    def holding(self: SessionFile, session: StoredSession) -> Any:
        held.append(self.path)
        return hold(self, session)

    monkeypatch.setattr(SessionFile, "hold", holding)
    measured = list(contexts([plain, packed], after_repair=True))
    assert held == [plain, packed]
    for path, (now, after) in zip((plain, packed), measured, strict=True):
        assert after is not None
        assert (now.filename, after.filename) == (str(path), str(path))
        assert now.file_bytes == len(data)
        assert (now.stale_reads, after.stale_reads) == (1, 0)

"""CodeWhale sessions (spec formats/codewhale.md): the reimplemented load path holds to
every behaviour §3 records, and sessionfix finds, shows and repairs documents so that
CodeWhale loads exactly the intended messages with no resume repair left to do."""

from __future__ import annotations

import copy
import fcntl
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sessionfix.cli import app
from sessionfix.formats.codewhale.transcript import lines

from . import codewhale_documents as docs
from .codewhale_loader import LoadError, load_session, load_snapshot, repair_tool_call_pairs
from .conftest import FIXTURES

ENV: Final = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
CASES: Final = sorted(docs.CASES)
SRC: Final = Path(__file__).resolve().parent.parent / "src"


def run(*args: str | Path, home: Path | None = None) -> Any:
    env = dict(ENV, HOME=str(home)) if home is not None else ENV
    return CliRunner().invoke(app, [str(a) for a in args], env=env, color=False)


def placed(tmp_path: Path, data: bytes, stem: str = "s") -> Path:
    """The document saved in a sessions folder, written long enough ago to be at rest."""
    folder = tmp_path / ".codewhale" / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.json"
    path.write_bytes(data)
    path.chmod(0o600)
    past = time.time() - 3600
    os.utime(path, (past, past))
    return path


def loads(value: dict[str, Any], tmp_path: Path) -> list[Any]:
    return load_session(placed(tmp_path, docs.saved(value), "probe")).messages


# ---- the load path (spec §3): one test per recorded behaviour --------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbf" + docs.clean(),
        docs.clean()[:-10],
        docs.clean() + b"x",
        docs.clean()[:20] + b"\xff" + docs.clean()[20:],
    ],
    ids=["bom", "torn", "trailing-garbage", "invalid-utf8"],
)
def test_a_document_that_does_not_parse_whole_fails_the_load(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(LoadError):
        load_session(placed(tmp_path, data))


def test_a_trailing_newline_is_fine(tmp_path: Path) -> None:
    assert load_session(placed(tmp_path, docs.clean() + b"\n")).messages


@pytest.mark.parametrize(
    "make", [docs.schema_two, docs.unknown_kind], ids=["schema-v2", "unknown-kind"]
)
def test_the_types_refuse_the_whole_document(tmp_path: Path, make: Any) -> None:
    with pytest.raises(LoadError):
        load_session(placed(tmp_path, make()))


def test_missing_messages_unknown_block_and_bad_created_at_fail(tmp_path: Path) -> None:
    value = json.loads(docs.clean())
    for broken in (
        {k: v for k, v in value.items() if k != "messages"},
        {**value, "messages": [{"role": "user", "content": [{"type": "video"}]}]},
    ):
        with pytest.raises(LoadError):
            loads(broken, tmp_path)
    bad_time = copy.deepcopy(value)
    bad_time["journal"]["entries"][0]["created_at"] = "yesterday"
    with pytest.raises(LoadError):
        loads(bad_time, tmp_path)


def test_the_journal_walk_replaces_a_stale_messages_array(tmp_path: Path) -> None:
    value = json.loads(docs.clean())
    value["messages"] = [docs.text("user", "stale")]
    assert loads(value, tmp_path) == [docs.HI, docs.call("c1"), docs.result("c1"), docs.DONE]


def test_a_missing_parent_silently_truncates_the_path(tmp_path: Path) -> None:
    assert load_snapshot(placed(tmp_path, docs.missing_parent())).messages == [
        docs.text("user", "next"),
        docs.text("assistant", "sure"),
    ]


def test_a_dangling_leaf_falls_back_to_messages_else_loads_empty(tmp_path: Path) -> None:
    value = json.loads(docs.clean())
    value["journal"]["leaf_id"] = "nowhere"
    assert loads(value, tmp_path) == value["messages"]
    value["messages"] = []
    assert loads(value, tmp_path) == []


def test_a_duplicate_id_resolves_to_the_later_entry(tmp_path: Path) -> None:
    assert load_snapshot(placed(tmp_path, docs.different_duplicate())).messages == [
        docs.HI,
        docs.text("assistant", "other"),
    ]


def test_a_parent_cycle_stops_at_the_first_repeat(tmp_path: Path) -> None:
    assert load_snapshot(placed(tmp_path, docs.parent_cycle())).messages == [docs.HI, docs.DONE]


def test_the_resume_repair_of_tool_call_pairs() -> None:
    """Kept: the first result in a later message of the group; gone: repeats, results
    naming no pending call (same message, before, after the next turn); a crashed call
    gets its result right after the call message; a receipt closes a changed list."""
    same_message = {
        "role": "assistant",
        "content": [*docs.call("c1")["content"], *docs.result("c1")["content"]],
    }
    repaired, changed = repair_tool_call_pairs(
        [
            docs.HI,
            same_message,
            docs.text("user", "wait"),
            docs.result("c1"),
            docs.result("c1"),
            docs.DONE,
            docs.result("c1"),
        ]
    )
    assert changed
    assert repaired[:3] == [docs.HI, docs.call("c1"), docs.text("user", "wait")]
    assert repaired[3] == docs.result("c1")
    assert repaired[-1]["content"][0]["text"] == (
        "[tool_history_repair] Repaired 0 crashed tool call(s); quarantined 1 duplicate and "
        "2 orphan terminal result(s)."
    )
    crashed, changed = repair_tool_call_pairs(
        [docs.HI, docs.call("c1"), docs.text("user", "go on"), docs.DONE]
    )
    assert crashed[2]["content"][0]["is_error"] is True
    assert crashed[3] == docs.text("user", "go on")
    assert repair_tool_call_pairs([docs.HI, docs.call("c1"), docs.result("c1"), docs.DONE]) == (
        [docs.HI, docs.call("c1"), docs.result("c1"), docs.DONE],
        False,
    )


# ---- fixtures: the documents the golden fixtures hold ---------------------------------


def test_each_fixture_holds_the_transcript_of_its_document() -> None:
    for name in CASES:
        case = FIXTURES / name
        data = (case / "session.json").read_bytes()
        assert data == docs.CASES[name](), name
        assert (case / "input.jsonl").read_bytes() == b"".join(lines("s", data)), name
        assert json.loads((case / "case.json").read_text()) == {
            "description": docs.DESCRIPTIONS[name]
        }


REPAIRED: Final = {
    "SF402-codewhale-crashed-tool-call",
    "SF402-codewhale-crash-mid-call",
    "SF402-codewhale-one-of-two-calls-answered",
    "SF403-codewhale-duplicate-result",
    "SF403-codewhale-repeat-in-one-message",
    "SF401-codewhale-orphan-result",
    "SF401-codewhale-result-after-next-turn",
    "SF103-codewhale-missing-parent",
    "SF104-codewhale-repeated-entry",
    "SF005-codewhale-bom",
    "SF004-codewhale-nul-run-before-document",
    "SF105-codewhale-parent-cycle",
    "SF205-codewhale-abandoned-branch",
}


def intended(original: Path) -> list[Any]:
    """What the session should load: CodeWhale's own pair repair, without its receipt;
    with a lost parent re-linked, the whole history."""
    try:
        loaded = load_session(original)
    except LoadError:
        return load_session(placed(original.parent.parent.parent / "clean", docs.clean())).messages
    if original.read_bytes() == docs.missing_parent():
        return [docs.HI, docs.DONE, docs.text("user", "next"), docs.text("assistant", "sure")]
    return loaded.repaired[:-1] if loaded.changed else loaded.messages


@pytest.mark.parametrize("name", sorted(REPAIRED))
def test_a_repaired_fixture_loads_as_intended_with_nothing_left_to_repair(
    name: str, tmp_path: Path
) -> None:
    data = (FIXTURES / name / "session.json").read_bytes()
    original = placed(tmp_path / "before", data)
    path = placed(tmp_path, data)
    result = run("repair", "--in-place", "--unsafe-fixes", "--prune-to-leaf", path)
    assert result.exit_code == 0, result.output
    assert path.read_bytes() != data
    after = load_session(path)
    assert not after.changed
    assert after.messages == intended(original)
    value = json.loads(path.read_bytes())
    assert value["metadata"]["updated_at"] == docs.UPDATED
    assert value["metadata"]["message_count"] == len(value["messages"]) == len(after.messages)
    assert path.stat().st_mode & 0o777 == 0o600
    assert not path.read_bytes().endswith(b"\n")
    backups = [p.name for p in path.parent.iterdir() if p != path]
    assert backups
    assert not any(b.endswith(".json") for b in backups)
    if name.startswith(("SF40",)):
        before = json.loads(data)["journal"]["entries"]
        assert value["journal"]["entries"][: len(before)] == before  # append-only


@pytest.mark.parametrize(
    "make", [docs.schema_two, docs.torn, docs.nul_filled], ids=["schema-v2", "torn", "nul"]
)
def test_a_document_codewhale_cannot_load_is_reported_and_left_as_it_is(
    tmp_path: Path, make: Any
) -> None:
    """No fix offered, none written: the damaged bytes are the whole session."""
    path = placed(tmp_path, make())
    result = run("repair", "--in-place", "--unsafe-fixes", path)
    assert result.exit_code == 1, result.output
    assert "Nothing to repair" in result.output
    assert path.read_bytes() == make()


def nested(brackets: int) -> bytes:
    """A crashed call whose input nests `brackets` arrays below the tool's input, which
    sits 8 arrays and objects deep in the journal."""
    messages = [docs.HI, docs.call("c1", path="NESTED"), docs.DONE]
    data = docs.saved(docs.document(docs.chain(messages), "e3", messages))
    return data.replace(b'"NESTED"', b"[" * brackets + b"]" * brackets)


@pytest.mark.parametrize(
    "brackets",
    [120, 500, 1000, 1020],
    ids=["at-the-limit", "past-orjson-s-writing", "past-python-s", "past-orjson-s-reading"],
)
def test_a_document_nested_past_serde_json_s_limit_is_sf101_and_left_as_it_is(
    tmp_path: Path, brackets: int
) -> None:
    """serde_json refuses arrays and objects nested 128 deep (the document the first):
    CodeWhale loads nothing of it, so no finding of its calls is true and none is fixed."""
    path = placed(tmp_path, nested(brackets))
    with pytest.raises(LoadError):
        load_session(path)
    found = run("check", "--output-format", "json", path)
    assert [f["code"] for f in json.loads(found.stdout)] == ["SF101"], found.output
    assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 1
    assert path.read_bytes() == nested(brackets)


@pytest.mark.parametrize(
    ("found", "refused"),
    [(b"fix the parser", b"fix \\ud800 parser"), (b'"path": "src/a.rs"', b'"path": 1e400')],
    ids=["lone-surrogate", "number-past-a-double"],
)
def test_json_that_serde_json_refuses_is_sf101_and_left_as_it_is(
    tmp_path: Path, found: bytes, refused: bytes
) -> None:
    """JSON that other parsers read (a lone surrogate escape, a number past a double)
    but serde_json refuses: CodeWhale loads nothing of the document."""
    data = docs.crashed_call().replace(found, refused, 1)
    assert data != docs.crashed_call()
    path = placed(tmp_path, data)
    with pytest.raises(LoadError):
        load_session(path)
    checked = run("check", "--output-format", "json", path)
    assert [f["code"] for f in json.loads(checked.stdout)] == ["SF101"], checked.output
    assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 1
    assert path.read_bytes() == data


def test_a_document_nested_up_to_serde_json_s_limit_loads(tmp_path: Path) -> None:
    path = placed(tmp_path, nested(119))
    assert load_session(path).changed
    found = run("check", "--output-format", "json", path)
    assert [f["code"] for f in json.loads(found.stdout)] == ["SF402"]


def long_session(turns: int, *, journal: bool = True) -> bytes:
    """A crashed call, then `turns` turns: a repair branches off near the root."""
    messages = [docs.HI, docs.call("c0"), docs.DONE]
    for turn in range(1, turns + 1):
        messages += [docs.call(f"c{turn}"), docs.result(f"c{turn}"), docs.DONE]
    if not journal:
        return docs.saved(docs.document(None, None, messages))
    return docs.saved(docs.document(docs.chain(messages), f"e{len(messages)}", messages))


def work_in_the_format(tmp_path: Path, turns: int, journal: bool) -> int:
    """How many functions the CodeWhale package calls (its own and built-in ones) while
    a document of `turns` turns is checked and repaired to a copy: a count, not a time,
    so that it does not depend on the machine."""
    path = placed(tmp_path / f"{turns}{journal}", long_session(turns, journal=journal))
    package = str(SRC / "sessionfix" / "formats" / "codewhale")
    calls = 0

    def count(frame: Any, event: str, arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call") and frame.f_code.co_filename.startswith(package):
            calls += 1

    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        checked = run("check", path)
        copied = run("repair", "--unsafe-fixes", "-o", tmp_path / f"{turns}{journal}.json", path)
    finally:
        sys.setprofile(previous)
    assert (checked.exit_code, copied.exit_code) == (1, 0), copied.output
    return calls


@pytest.mark.parametrize("journal", [True, False], ids=["journal", "messages-only"])
def test_checking_and_repairing_a_document_is_linear_in_its_entries(
    tmp_path: Path, journal: bool
) -> None:
    """Twice the entries, about twice the work (a quadratic step, as a messages-in-step
    check that re-read the journal per entry did, makes it four times)."""
    small, large = (work_in_the_format(tmp_path, turns, journal) for turns in (150, 300))
    assert large < 2.5 * small, (small, large)


# ---- the command line ------------------------------------------------------------------


def test_discovery_check_diff_copy_restore_and_context(tmp_path: Path) -> None:
    path = placed(tmp_path, docs.crashed_call())
    (path.parent / "session_boot_owners.json").write_text('{"s": "boot_000000000000"}')
    found = run("scan", "--output-format", "json", "--no-progress", home=tmp_path)
    assert found.exit_code == 1
    assert [f["code"] for f in json.loads(found.stdout)] == ["SF402"]
    diff = run("repair", "--diff", "--unsafe-fixes", path)
    assert "crashed_and_repaired" in diff.stdout
    copied = tmp_path / "copy.json"
    assert run("repair", "-o", copied, "--unsafe-fixes", path).exit_code == 0
    assert not load_session(copied).changed
    assert path.read_bytes() == docs.crashed_call()
    context = run("context", path)
    assert context.exit_code == 0
    assert f"CodeWhale loads {len(load_session(path).repaired)} messages" in context.output
    assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 0
    listed = run("restore", "--list", path)
    assert listed.stdout.split("\t")[2:] == ["whole document", "ok\n"], listed.stdout
    assert (
        json.loads(run("restore", "--list", "--output-format", "json", path).stdout)[0]["rows"]
        is None
    )
    assert run("restore", path).exit_code == 0
    assert path.read_bytes() == docs.crashed_call()


def test_a_copy_to_a_fifo_nobody_reads_does_not_wait(tmp_path: Path) -> None:
    """`-o` onto a FIFO without a reader refuses at once, as a session file's `-o` does."""
    path = placed(tmp_path, docs.crashed_call())
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(SRC))
    command = [sys.executable, "-m", "sessionfix", "repair", "--unsafe-fixes", "--force"]
    done = subprocess.run(
        [*command, "-o", str(fifo), str(path)], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 2
    assert b"no process reads it" in done.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_document_saved_while_it_is_repaired_is_left_as_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CodeWhale saves (a rename over it) between sessionfix's read and its write: the
    save stays, and nothing of the repair is left beside it."""
    from sessionfix.formats.codewhale import store

    path = placed(tmp_path, docs.crashed_call())
    repaired = store.repaired_document

    def saved_meanwhile(*args: Any) -> bytes:
        data = repaired(*args)
        newer = path.with_name("newer")
        newer.write_bytes(docs.clean())
        newer.replace(path)
        return data

    monkeypatch.setattr(store, "repaired_document", saved_meanwhile)
    result = run("repair", "--in-place", "--unsafe-fixes", path)
    assert result.exit_code != 0
    assert "changed since it was read" in result.output
    assert path.read_bytes() == docs.clean()
    assert sorted(p.name for p in path.parent.iterdir()) == ["s.json"]


def test_a_session_whose_runtime_lock_is_held_is_not_written(tmp_path: Path) -> None:
    path = placed(tmp_path, docs.crashed_call())
    lock = path.parent / "s" / "runtime" / "runtime-process.owner.lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 0
    repaired = path.read_bytes()
    with open(lock, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        path.write_bytes(docs.crashed_call())
        os.utime(path, (time.time() - 3600,) * 2)
        result = run("repair", "--in-place", "--unsafe-fixes", path)
        restored = run("restore", path)
    assert result.exit_code != 0
    assert "Runtime lock" in result.output
    assert restored.exit_code != 0
    assert path.read_bytes() == docs.crashed_call() != repaired


def test_a_checkpoint_of_a_session_whose_runtime_lock_is_held_is_not_written(
    tmp_path: Path,
) -> None:
    """The lock is the session's, in the sessions folder, not beside the checkpoint."""
    path = placed(tmp_path, docs.clean())
    checkpoint = path.parent / "checkpoints" / path.name
    checkpoint.parent.mkdir()
    checkpoint.write_bytes(docs.crashed_call())
    os.utime(checkpoint, (time.time() - 7200,) * 2)
    lock = path.parent / "s" / "runtime" / "runtime-process.owner.lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    with open(lock, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result = run("repair", "--in-place", "--unsafe-fixes", checkpoint)
    assert result.exit_code != 0
    assert "Runtime lock" in result.output
    assert checkpoint.read_bytes() == docs.crashed_call()


def test_a_document_with_another_hard_link_is_not_split(tmp_path: Path) -> None:
    """The rename would leave the other name the old bytes: refused, as a session
    file's writer refuses it; the document's own backup links are no other name."""
    path = placed(tmp_path, docs.crashed_call())
    other = tmp_path / "elsewhere.json"
    os.link(path, other)
    result = run("repair", "--in-place", "--unsafe-fixes", path)
    assert result.exit_code != 0
    assert "hard link" in result.output
    assert path.read_bytes() == other.read_bytes() == docs.crashed_call()
    other.unlink()
    assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 0
    assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 0
    assert run("restore", path).exit_code == 0
    assert path.read_bytes() == docs.crashed_call()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file another owner")
def test_a_repair_as_root_keeps_the_document_s_owner(tmp_path: Path) -> None:
    """CodeWhale runs as the user: a repaired document owned by root, mode 0600, is one
    it cannot read."""
    path = placed(tmp_path, docs.crashed_call())
    os.chown(path, 4321, 4321)
    assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 0
    assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4321)
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    "point", ["codewhale-written", "codewhale-backed-up", "codewhale-replaced"]
)
def test_a_kill_leaves_the_document_as_it_was_or_fully_repaired(point: str, tmp_path: Path) -> None:
    path = placed(tmp_path, docs.crashed_call())
    whole = placed(tmp_path / "whole", docs.crashed_call())
    assert run("repair", "--in-place", "--unsafe-fixes", whole).exit_code == 0
    env = dict(os.environ, SESSIONFIX_KILL_AT=point, PYTHONPATH=str(SRC))
    killed = subprocess.run(
        [sys.executable, "-m", "sessionfix", "repair", "--in-place", "--unsafe-fixes", str(path)],
        env=env,
        capture_output=True,
        check=False,
    )
    assert killed.returncode == -9
    assert path.read_bytes() in (docs.crashed_call(), whole.read_bytes())
    assert load_session(path).messages in (
        load_snapshot(placed(tmp_path / "before", docs.crashed_call())).messages,
        load_session(whole).messages,
    )


def test_a_legacy_copy_and_an_expired_checkpoint_are_reported_and_left_alone(
    tmp_path: Path,
) -> None:
    """CodeWhale reads the `~/.codewhale` copy of a session also under `~/.deepseek`, and
    deletes a checkpoint older than a day: those copies are info, never read as sessions."""
    current = placed(tmp_path, docs.clean())
    legacy = tmp_path / ".deepseek" / "sessions" / "s.json"
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(docs.crashed_call())
    legacy_only = legacy.with_name("t.json")  # read: no `~/.codewhale` copy of it
    legacy_only.write_bytes(docs.crashed_call())
    checkpoint = current.parent / "checkpoints" / "s.json"
    checkpoint.parent.mkdir()
    checkpoint.write_bytes(docs.crashed_call())
    old = time.time() - 2 * 24 * 3600
    os.utime(checkpoint, (old, old))
    found = run("scan", "--output-format", "json", "--no-progress", home=tmp_path)
    codes = sorted(
        (Path(f["filename"].split(":")[0]).parent.name, f["code"]) for f in json.loads(found.stdout)
    )
    assert codes == [("checkpoints", "SF113"), ("sessions", "SF113"), ("sessions", "SF402")]
    assert run("repair", "--in-place", "--unsafe-fixes", legacy).exit_code == 0
    assert legacy.read_bytes() == docs.crashed_call()


def test_a_legacy_copy_beside_a_fifo_of_its_name_does_not_block_a_scan(tmp_path: Path) -> None:
    """Whether CodeWhale reads a legacy copy depends on the `~/.codewhale` file of its
    name, which a scan must not wait on when it is a FIFO."""
    legacy = tmp_path / ".deepseek" / "sessions" / "s.json"
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(docs.crashed_call())
    os.utime(legacy, (time.time() - 3600,) * 2)
    fifo = tmp_path / ".codewhale" / "sessions" / "s.json"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(SRC), HOME=str(tmp_path))
    command = [sys.executable, "-m", "sessionfix", "scan", "--no-progress"]
    done = subprocess.run(command, env=env, capture_output=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert b"SF402" in done.stdout + done.stderr


def test_context_of_a_document_codewhale_cannot_load_says_so(tmp_path: Path) -> None:
    for data in (docs.torn(), docs.schema_two()):
        result = run("context", placed(tmp_path, data))
        assert "CodeWhale" in result.output
        assert "loads 0 messages" not in result.output


def test_a_lost_parent_is_not_relinked_once_codewhale_saved_the_cut_history(
    tmp_path: Path,
) -> None:
    """After CodeWhale's own resume and save, `messages` holds the cut-down list: the
    re-link would no longer give back what the document holds (spec §5)."""
    value = json.loads(docs.missing_parent())
    value["messages"] = value["messages"][2:]
    path = placed(tmp_path, docs.saved(value))
    result = run("repair", "--in-place", "--unsafe-fixes", path)
    assert result.exit_code != 0
    assert path.read_bytes() == docs.saved(value)


# ---- invariants over generated conversations -------------------------------------------

CALL_IDS: Final = ("c1", "c2", "c3")


def _message(kind: str, ids: tuple[str, ...], n: int) -> dict[str, Any]:
    if kind == "user":
        return docs.text("user", f"ask {n}")
    if kind == "assistant":
        message = docs.text("assistant", f"answer {n}")
        for call_id in ids:
            message["content"].append(
                {"type": "tool_use", "id": call_id, "name": "bash", "input": {"cmd": "ls"}}
            )
        return message
    return docs.result(*ids, body=f"out {n}")


conversations = st.lists(
    st.tuples(
        st.sampled_from(("user", "assistant", "result")),
        st.lists(st.sampled_from(CALL_IDS), max_size=2, unique=True).map(tuple),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=25)
@given(turns=conversations)
def test_a_repair_keeps_every_entry_and_leaves_a_document_codewhale_loads(
    turns: list[tuple[str, tuple[str, ...]]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Whatever the conversation, a repair appends and never edits an entry, keeps
    `updated_at`, and CodeWhale loads what it writes; where no finding of a tool-call
    pair is left, CodeWhale's resume repair has nothing to do, and the session loads
    the messages that repair gave it (without its receipt)."""
    messages = [
        _message(kind, ids, n)
        for n, (kind, ids) in enumerate(turns)
        if kind == "user" or ids or kind == "assistant"
    ]
    data = docs.saved(docs.document(docs.chain(messages), f"e{len(messages)}", messages))
    path = placed(tmp_path_factory.mktemp("doc"), data)
    before_repair = load_session(path)
    result = run("repair", "--in-place", "--unsafe-fixes", "--output-format", "json", path)
    assert result.exit_code in (0, 1), result.output
    value = json.loads(path.read_bytes())
    before = json.loads(data)["journal"]["entries"]
    assert value["journal"]["entries"][: len(before)] == before
    assert value["metadata"]["updated_at"] == docs.UPDATED
    after = load_session(path)
    assert value["messages"] == after.messages
    left = run("check", "--output-format", "json", path)
    codes = {finding["code"] for finding in json.loads(left.stdout or "[]")}
    if not codes & {"SF401", "SF402", "SF403", "SF404"}:
        assert not after.changed, after.repaired
        if before_repair.changed:
            assert after.messages == before_repair.repaired[:-1]


def _two_calls() -> dict[str, Any]:
    message = docs.call("c1")
    message["content"].append(
        {"type": "tool_use", "id": "c2", "name": "bash", "input": {"cmd": "ls"}}
    )
    return message


def _answered_twice() -> dict[str, Any]:
    """The first call's result, then another for it in the same message."""
    message = docs.result("c1")
    message["content"] += docs.result("c1", body="again")["content"]
    return message


@pytest.mark.parametrize(
    ("messages", "count"),
    [
        ([docs.HI, _two_calls(), docs.DONE], 4),
        ([docs.HI, docs.result("c1", "c2"), docs.DONE], 2),
        ([docs.HI, _two_calls(), _answered_twice(), docs.DONE], 5),
    ],
    ids=["two-crashed-calls", "a-message-of-two-orphans", "a-repeat-in-the-same-message"],
)
def test_a_repair_leaves_the_messages_codewhale_s_own_repair_leaves(
    tmp_path: Path, messages: list[dict[str, Any]], count: int
) -> None:
    """CodeWhale's repair gives every crashed call of a call message its result in one
    new user message right after it, and drops a message it leaves without blocks; so
    does sessionfix, with a journal or without."""
    for entries, leaf in ((docs.chain(messages), f"e{len(messages)}"), (None, None)):
        path = placed(tmp_path, docs.saved(docs.document(entries, leaf, messages)))
        wanted = load_session(path).repaired[:-1]
        assert len(wanted) == count
        assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 0
        assert not load_session(path).changed
        assert load_session(path).messages == wanted


def test_a_document_without_a_journal_has_its_messages_repaired(tmp_path: Path) -> None:
    """Before 0.9.5 there is no journal: the messages are edited as they are (spec §7)."""
    messages = [docs.HI, docs.call("c1"), docs.DONE]
    path = placed(tmp_path, docs.saved(docs.document(None, None, messages)))
    assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 0
    after = load_session(path)
    assert not after.changed
    assert after.messages == load_session(placed(tmp_path / "o", docs.crashed_call())).repaired[:-1]
    assert "journal" not in json.loads(path.read_bytes())


def test_context_references_follow_their_messages_and_unknown_fields_stay(
    tmp_path: Path,
) -> None:
    messages = [docs.HI, docs.call("c1"), docs.DONE]
    references = [
        {"message_index": 0, "reference": {"path": "a"}},
        {"message_index": 2, "reference": {"path": "b"}},
    ]
    value = docs.document(
        docs.chain(messages), "e3", messages, context_references=references, x_plugin={"k": 1}
    )
    path = placed(tmp_path, docs.saved(value))
    assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 0
    written = json.loads(path.read_bytes())
    assert [r["message_index"] for r in written["context_references"]] == [0, 3]
    assert written["messages"][3] == docs.DONE
    assert written["x_plugin"] == {"k": 1}
    assert list(written) == list(value)


def test_a_session_with_a_younger_checkpoint_is_not_written(tmp_path: Path) -> None:
    """A turn in flight writes `checkpoints/<id>.json`: CodeWhale has the session open."""
    path = placed(tmp_path, docs.crashed_call())
    checkpoint = path.parent / "checkpoints" / path.name
    checkpoint.parent.mkdir()
    checkpoint.write_bytes(docs.crashed_call())
    result = run("repair", "--in-place", "--unsafe-fixes", path)
    assert result.exit_code != 0
    assert "checkpoint" in result.output
    assert path.read_bytes() == docs.crashed_call()


def test_a_repaired_checkpoint_keeps_its_age(tmp_path: Path) -> None:
    """A checkpoint's modification time is its age to CodeWhale (deleted after 24 hours,
    promoted over an older session file) and to sessionfix (younger than the document:
    a turn in flight): a repair of it that made it new would make it a newer copy of the
    session and refuse every later repair of the document."""
    path = placed(tmp_path, docs.crashed_call())
    checkpoint = path.parent / "checkpoints" / path.name
    checkpoint.parent.mkdir()
    checkpoint.write_bytes(docs.crashed_call())
    os.utime(checkpoint, (time.time() - 7200,) * 2)
    age = checkpoint.stat().st_mtime_ns
    assert run("repair", "--in-place", "--unsafe-fixes", checkpoint).exit_code == 0
    assert not load_session(checkpoint).changed
    assert checkpoint.stat().st_mtime_ns == age
    assert run("repair", "--in-place", "--unsafe-fixes", path).exit_code == 0
    assert run("restore", checkpoint).exit_code == 0
    assert (checkpoint.read_bytes(), checkpoint.stat().st_mtime_ns) == (docs.crashed_call(), age)


def test_a_document_written_within_the_quiescence_window_waits(tmp_path: Path) -> None:
    path = placed(tmp_path, docs.crashed_call())
    os.utime(path)
    refused = run("repair", "--in-place", "--unsafe-fixes", path)
    assert refused.exit_code != 0
    assert "quiescence" in refused.output
    assert path.read_bytes() == docs.crashed_call()
    done = run("repair", "--in-place", "--unsafe-fixes", "--quiescence", "0", path)
    assert done.exit_code == 0, done.output
    assert not load_session(path).changed


def test_context_sends_a_repeated_long_result_as_a_reference_but_never_a_writes(
    tmp_path: Path,
) -> None:
    """CodeWhale's wire dedup (PR #1741): the second identical long read result is a
    back-reference; a write's identical confirmation is sent whole each time."""
    from sessionfix.context import contexts

    body = "x" * 2000

    def sent(tool: str, folder: str) -> int:
        messages = [
            docs.HI,
            docs.call("a", tool),
            docs.result("a", body=body),
            docs.call("b", tool),
            docs.result("b", body=body),
            docs.DONE,
        ]
        path = placed(
            tmp_path / folder, docs.saved(docs.document(docs.chain(messages), "e6", messages))
        )
        return next(contexts([path]))[0].message_bytes

    assert sent("write_file", "w") - sent("read_file", "r") > len(body) - 100


def _offers_no_fix(name: str) -> bool:
    found = json.loads((FIXTURES / name / "diagnostics.json").read_text())
    return not any(finding["fix"] for finding in found)


@pytest.mark.parametrize("name", [name for name in CASES if _offers_no_fix(name)])
def test_a_fixture_with_nothing_to_fix_is_left_byte_for_byte(name: str, tmp_path: Path) -> None:
    """Traps, and findings CodeWhale's model leaves to the user (a refused document, a
    different entry under a repeated id, a lost leaf, a result after the next turn, a
    stale read): the document is not written."""
    data = (FIXTURES / name / "session.json").read_bytes()
    path = placed(tmp_path, data)
    result = run("repair", "--in-place", "--unsafe-fixes", "--prune-to-leaf", path)
    assert result.exit_code in (0, 1), result.output
    assert path.read_bytes() == data
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_repair_keeps_the_session_among_the_fifty_codewhale_keeps(tmp_path: Path) -> None:
    """`cleanup_old_sessions` keeps the 50 most recently updated: a repair keeps
    `updated_at`, and its backup is no `*.json` that would count among them."""
    from .codewhale_loader import surviving_sessions

    for n in range(51):
        value = json.loads(docs.crashed_call())
        value["metadata"]["updated_at"] = f"2026-08-20T11:{n:02d}:00Z"
        placed(tmp_path, docs.saved(value), f"s{n:02d}")
    folder = tmp_path / ".codewhale" / "sessions"
    before = surviving_sessions(folder)
    assert "s00" not in before
    assert run("repair", "--in-place", "--unsafe-fixes", folder / "s01.json").exit_code == 0
    assert surviving_sessions(folder) == before


def test_another_agents_json_in_a_sessions_folder_is_no_codewhale_document(
    tmp_path: Path,
) -> None:
    """OpenClaw keeps its session index as `agents/<id>/sessions/sessions.json`: a walk
    neither takes it for a session nor reads it as CodeWhale's."""
    from sessionfix.containers import is_store
    from sessionfix.discovery import discover

    folder = tmp_path / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    index = folder / "sessions.json"
    index.write_text('{\n  "agent:main:main": {"sessionId": "s1", "updatedAt": 1767225600000}\n}')
    assert not is_store(index)
    assert discover([tmp_path]).files == []
    document = placed(tmp_path, docs.clean())
    assert is_store(document)
    assert discover([tmp_path]).files == [document]


def test_a_block_or_entry_of_the_wrong_shape_fails_the_load_and_is_sf101(
    tmp_path: Path,
) -> None:
    """serde reads a result's content as a string, a text entry's text too: a content
    list (Anthropic's shape) or a missing summary fails the whole load."""
    listed = json.loads(docs.clean())
    listed["journal"]["entries"][2]["message"]["content"][0]["content"] = [
        {"type": "text", "text": "ok"}
    ]
    summary = json.loads(docs.clean())
    summary["journal"]["entries"].append(
        {"id": "c", "parent_id": "e4", "kind": "compaction", "created_at": docs.CREATED}
    )
    for value in (listed, summary):
        path = placed(tmp_path, docs.saved(value))
        with pytest.raises(LoadError):
            load_session(path)
        found = json.loads(run("check", "--output-format", "json", path).stdout)
        assert [f["code"] for f in found] == ["SF101"]

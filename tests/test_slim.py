"""`sessionfix slim`: the budget, the plan, the written result and what it refuses; the
proof in the agents' own loaders is in test_pi_loader.py and test_claude_loader.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sessionfix import Settings, read_session
from sessionfix.cli import app
from sessionfix.context import context_of
from sessionfix.errors import SessionfixError, UsageError
from sessionfix.formats.content import shortened
from sessionfix.repair.targets import repair_to
from sessionfix.slim import TRUNCATED, DoesNotFit, budget_tokens, size_bytes, window_of

from .conftest import CORPUS
from .sessions import Session, rollouts, sessions
from .slim_cases import (
    BUDGET,
    COMPACTED_BUDGET,
    TURNS,
    assert_cut,
    claude_lines,
    codex_rollout,
    output,
    pi_compacted_session,
    pi_session,
)

ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
LONG_AGO = 1_700_000_000


def run(*args: str | Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, color=False)


def _at_rest(path: Path) -> Path:
    os.utime(path, (LONG_AGO, LONG_AGO))
    return path


def test_a_budget_is_tokens_or_a_share_of_a_published_window() -> None:
    assert budget_tokens("150000", None) == 150_000
    assert budget_tokens("150k", None) == 150_000
    assert budget_tokens("80%", "claude-sonnet-4-5-20250929") == 160_000
    assert budget_tokens("50%", "gpt-5-codex") == 200_000
    assert window_of("claude-opus-4-1") == 200_000
    bad = (("80%", None), ("0", None), ("lots", None), ("inf", None), ("120%", "gpt-5"))
    for text, model in bad:
        with pytest.raises(UsageError):
            budget_tokens(text, model)
    with pytest.raises(UsageError, match="no published window"):
        window_of("llama-3")


def test_a_size_is_bytes_decimal_or_binary() -> None:
    assert size_bytes("100MB") == 100_000_000
    assert size_bytes("1.5GiB") == 3 * 2**29
    assert size_bytes("500 kb") == 500_000
    assert size_bytes("5000000") == 5_000_000
    for text in ("0", "lots", "5 MiBs", "-1MB", "1e400GB"):
        with pytest.raises(UsageError):
            size_bytes(text)


@given(st.text(max_size=3000), st.integers(0, 200), st.integers(0, 200))
def test_a_shortened_text_keeps_its_first_line_head_and_tail(
    text: str, head: int, tail: int
) -> None:
    now = shortened(text, head, tail, TRUNCATED)
    if now == text:
        return
    assert_cut(text, now)
    assert len(now) < len(text)


def test_a_session_within_the_budget_is_left_byte_for_byte(tmp_path: Path) -> None:
    session = _at_rest(pi_session(tmp_path / "s.jsonl"))
    before = session.read_bytes()
    tokens = context_of(session).tokens
    result = run("slim", "--in-place", "--budget", str(tokens), session)
    assert result.exit_code == 0, result.stderr
    assert f"{tokens:,} tokens, within the budget of {tokens:,}" in result.stderr
    assert session.read_bytes() == before
    size = str(len(before))
    result = run("slim", "--in-place", "--budget", str(tokens), "--max-size", size, session)
    assert result.exit_code == 0, result.stderr
    assert "within the budget of" in result.stderr
    assert "and the size limit of" in result.stderr
    assert session.read_bytes() == before
    assert os.stat(session).st_mtime == LONG_AGO
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_slim_in_place_keeps_a_backup_that_restore_puts_back(tmp_path: Path) -> None:
    session = _at_rest(claude_lines(tmp_path / "3f6a9c2e-1b4d-4e7f-8a0c-5d2e7f9b1c3a.jsonl"))
    before = session.read_bytes()
    result = run("slim", "--in-place", "--budget", str(BUDGET), session)
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == f"{session}: 47,986 tokens, over the budget of {BUDGET:,}"
    assert lines[1].startswith("  - old tool outputs cut to a head and a tail (8 records): saves ")
    assert lines[2].startswith("  - inline media replaced by a placeholder (1 record): saves ")
    assert lines[3].endswith("tokens remain, within the budget")
    after = context_of(session).tokens
    assert after <= BUDGET
    assert f"{after:,} tokens remain" in lines[3]
    assert f" saved (~{47_986 - after:,} tokens); backup: " in lines[4]
    assert run("restore", "--quiescence", "0", session).exit_code == 0
    assert session.read_bytes() == before


def test_diff_shows_the_plan_and_changes_nothing(tmp_path: Path) -> None:
    session = _at_rest(pi_session(tmp_path / "s.jsonl"))
    before = session.read_bytes()
    result = run("slim", "--diff", "--budget", str(BUDGET), session)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"--- a/{session}")
    assert result.stdout.count("\n+{") == 9
    assert "tokens remain, within the budget" in result.stderr
    assert session.read_bytes() == before


def test_a_session_that_cannot_fit_is_not_written(tmp_path: Path) -> None:
    """Everything the slim may cut leaves the last two turns' outputs over a budget this
    small: it says how far it gets, and writes nothing."""
    session = _at_rest(pi_session(tmp_path / "s.jsonl"))
    before = session.read_bytes()
    result = run("slim", "--in-place", "--budget", "5k", session)
    assert result.exit_code == 2
    assert "cannot be brought under 5,000 tokens: 47,922 tokens now, " in result.stderr
    assert "outside the last 2 turns" in result.stderr
    assert "nothing written" in result.stderr
    assert session.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
    target = tmp_path / "out.jsonl"
    assert run("slim", "-o", target, "--budget", "5k", session).exit_code == 2
    assert not target.exists()


def test_protected_turns_are_never_cut(tmp_path: Path) -> None:
    """With every turn protected nothing may go; with none, the budget is met sooner
    than with the default two (the newest outputs may go too)."""
    session = _at_rest(pi_session(tmp_path / "s.jsonl"))
    result = run("slim", "--diff", "--protect-last-turns", "10", "--budget", str(BUDGET), session)
    assert result.exit_code == 2
    assert "none applies" in result.stderr
    result = run("slim", "--diff", "--protect-last-turns", "0", "--budget", "8k", session)
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize(
    ("name", "prompt", "budget"),
    [
        # The last prompt follows a notice that the turn before was interrupted.
        ("37-995ebed6e4-2", "Implement 1,2 and 3.", None),
        # The last prompt's turn holds the isMeta text of the skill it invoked.
        ("71-69f9710768-0", "I just did an update, check again?", 15_458),
    ],
)
def test_the_protected_turns_are_the_last_prompts_a_person_typed(
    tmp_path: Path, name: str, prompt: str, budget: int | None
) -> None:
    """Claude Code writes user records nobody typed (an interruption's notice, a skill's
    `isMeta` text): they start no turn, so on these real sessions the last two turns
    start at the second-to-last prompt, and `slim` leaves every record from there on
    whole (a budget that needs more is refused)."""
    session = CORPUS / "claude" / "entireio-cli" / f"{name}.full.jsonl"
    lines = session.read_bytes().splitlines()
    view = read_session(session).view
    start = view.rows[view.active_path[view.last_turns_start(2)]] - 1
    assert prompt.encode() in lines[start]
    if budget is None:
        return
    target = tmp_path / "out.jsonl"
    result = run("slim", "--quiescence", "0", "--budget", str(budget), "-o", target, session)
    if result.exit_code == 2:
        assert "nothing written" in result.stderr
        assert not target.exists()
        return
    assert result.exit_code == 0, result.stderr
    written = set(target.read_bytes().splitlines())
    assert [n for n, line in enumerate(lines[start:], start) if line not in written] == []


def test_codex_context_messages_start_no_turn(tmp_path: Path) -> None:
    """Codex writes its environment as a user message when it changes mid-session, and
    counts no turn at it: the last two turns slim leaves whole start at the prompt
    before (its output stays whole, and a budget that needs it cut is refused)."""
    rollout = codex_rollout(tmp_path / "rollout.jsonl")
    lines = rollout.read_text().splitlines(keepends=True)
    last = next(n for n, line in enumerate(lines) if f"build step {TURNS - 1}" in line)
    context = {"type": "input_text", "text": "<environment_context>\n  <cwd>/home/me/lib</cwd>"}
    lines.insert(
        last,
        json.dumps(
            {
                "timestamp": "2026-10-01T09:00:59.000Z",
                "type": "response_item",
                "payload": {"type": "message", "role": "user", "content": [context]},
            }
        )
        + "\n",
    )
    rollout.write_text("".join(lines))
    view = read_session(rollout).view
    start = view.rows[view.active_path[view.last_turns_start(2)]] - 1
    assert f"build step {TURNS - 2}" in lines[start]
    target = tmp_path / "out.jsonl"
    result = run("slim", "--quiescence", "0", "--budget", "15000", "-o", target, rollout)
    assert result.exit_code == 2, result.stderr
    assert "nothing written" in result.stderr
    assert not target.exists()


def test_the_plan_names_no_repair_fix_it_did_not_make(tmp_path: Path) -> None:
    """A real pi session whose compaction a glued line hid: repair's split lays the
    compaction bare, and pi loads from it on. The plan says repair's fixes save those
    tokens and names none of them (the summary line does), not "stale reads"."""
    session = CORPUS / "openclaw" / "pi-mono__compact.v1.glued-line.jsonl"
    target = tmp_path / "out.jsonl"
    result = run("slim", "--quiescence", "0", "--budget", "150k", "-o", target, session)
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[1] == "  - repair's own fixes: saves 156,309 tokens"
    assert "1 glued line split" in lines[3]


def test_a_budget_in_percent_needs_a_model(tmp_path: Path) -> None:
    session = pi_session(tmp_path / "s.jsonl")
    result = run("slim", "--diff", "--budget", "80%", session)
    assert result.exit_code == 2
    assert "needs --model" in result.stderr


def test_context_after_slim_shows_before_and_after(tmp_path: Path) -> None:
    session = _at_rest(pi_session(tmp_path / "s.jsonl"))
    before = session.read_bytes()
    result = run("context", "--after-slim", "--budget", str(BUDGET), session)
    assert result.exit_code == 0, result.stderr
    assert f"after slim to {BUDGET:,} tokens" in result.stdout
    assert "pi loads 40 messages (now 40), about 13,896 tokens (now 47,922)" in result.stdout
    assert session.read_bytes() == before
    assert run("context", "--budget", str(BUDGET), session).exit_code == 2


def test_context_after_slim_takes_a_size_as_slim_does(tmp_path: Path) -> None:
    """`context --after-slim` measures what `slim` writes for a size, alone or with a
    budget, and takes `--model` only with a budget."""
    session = _at_rest(claude_lines(tmp_path / "3f6a9c2e-1b4d-4e7f-8a0c-5d2e7f9b1c3a.jsonl"))
    before = session.read_bytes()
    result = run("context", "--after-slim", "--max-size", "300KB", session)
    assert result.exit_code == 0, result.stderr
    assert "after slim to 293.0 KiB (now 450.8 KiB)" in result.stdout
    assert "about 47,986 tokens (now 47,986)" in result.stdout
    both = ("--budget", str(BUDGET), "--max-size", "300KB", "--output-format", "json")
    result = run("context", "--after-slim", *both, session)
    assert result.exit_code == 0, result.stderr
    [measured] = json.loads(result.stdout)
    assert (measured["budget"], measured["max_size"]) == (BUDGET, 300_000)
    assert measured["tokens"]["estimate"] <= BUDGET
    assert session.read_bytes() == before
    for options in (("--max-size", "300KB"), ("--after-slim", "--model", "gpt-5")):
        result = run("context", *options, session)
        assert result.exit_code == 2
        assert len(result.stderr.splitlines()) == 1


def test_the_plan_says_which_limit_a_session_is_over(tmp_path: Path) -> None:
    """Over the budget and within the size limit, the plan's first line says so (not
    "over the budget and the size limit")."""
    session = _at_rest(claude_lines(tmp_path / "3f6a9c2e-1b4d-4e7f-8a0c-5d2e7f9b1c3a.jsonl"))
    result = run("slim", "--diff", "--budget", str(BUDGET), "--max-size", "10MB", session)
    assert result.exit_code == 0, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.endswith(f"over the budget of {BUDGET:,}, within the size limit of 9.5 MiB")
    result = run("slim", "--diff", "--budget", "100k", "--max-size", "300KB", session)
    assert result.exit_code == 0, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.endswith("within the budget of 100,000, over the size limit of 293.0 KiB")


def test_a_result_without_content_blocks_is_left_alone(tmp_path: Path) -> None:
    """A pi `bashExecution` (a `!` command's output, sent as a user message) holds its
    output in no content block: slim cuts the tool outputs around it and leaves it."""
    session = pi_session(tmp_path / "s.jsonl")
    lines = session.read_text().splitlines()
    first = json.loads(lines[1])
    bash = {
        "type": "message",
        "id": "b0000001",
        "parentId": first["id"],
        "timestamp": first["timestamp"],
        "message": {
            "role": "bashExecution",
            "command": "make all",
            "output": output(99),
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
            "timestamp": first["message"]["timestamp"],
        },
    }
    second = json.loads(lines[2])
    second["parentId"] = bash["id"]
    lines[2] = json.dumps(second, separators=(",", ":"))
    lines.insert(2, json.dumps(bash, separators=(",", ":")))
    _at_rest(session)
    session.write_text("".join(line + "\n" for line in lines))
    result = run("slim", "-o", tmp_path / "out.jsonl", "--budget", str(BUDGET + 4_500), session)
    assert result.exit_code == 0, result.stderr
    written = (tmp_path / "out.jsonl").read_text().splitlines()
    assert written[2] == lines[2]
    assert "(8 records)" in result.stderr


def test_the_oldest_kept_turns_go_last_and_what_was_cut_of_them_goes_with_them(
    tmp_path: Path,
) -> None:
    """Cutting outputs is not enough for the compacted session: the compaction keeps
    fewer turns; the outputs of the turns it no longer keeps are not cut as well."""
    session = _at_rest(pi_compacted_session(tmp_path / "s.jsonl"))
    result = run("slim", "--diff", "--budget", str(COMPACTED_BUDGET), session)
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[1].startswith("  - old tool outputs cut to a head and a tail (3 records)")
    assert lines[2].startswith(
        "  - the oldest turns the last compaction keeps left out of the context (3 turns)"
    )
    changed = [line for line in result.stdout.splitlines() if line.startswith("+{")]
    assert len(changed) == 4
    assert sum('"type":"compaction"' in line for line in changed) == 1


LONG_OUTPUT = json.dumps(output(7))[1:-1].encode()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=sessions(), share=st.sampled_from([2, 3, 4]))
def test_a_slim_fits_its_budget_or_writes_nothing_and_settles(
    tmp_path: Path, data: bytes, share: int
) -> None:
    """On generated pi sessions, damaged ones too, with long outputs: a slim to a share
    of what the agent loads either leaves the result within the budget, where a second
    slim leaves it byte for byte, or refuses and writes nothing: every reduction leaves
    it over, or repair's own fixes leave a session pi does not load (a glued line split
    lays bare a parent cycle pi read past)."""
    source = tmp_path / "s.jsonl"
    source.write_bytes(data.replace(b"file contents " * 20, LONG_OUTPUT))
    measured = context_of(source)
    if measured.refused is not None or measured.tokens < 2:
        return
    budget = measured.tokens * (share - 1) // share
    chosen = Settings(quiescence=0.0, budget=budget, protect_last_turns=1)
    target = tmp_path / "out.jsonl"
    target.unlink(missing_ok=True)
    refusal = ""
    try:
        repair_to(source, target, chosen)
    except DoesNotFit:
        refusal = "every reduction leaves it over"
    except SessionfixError as refused:
        refusal = str(refused)
        assert "as repair's own fixes leave it, pi " in refusal
    if refusal:
        assert not target.exists()
        return
    assert context_of(target).tokens <= budget
    again = tmp_path / "again.jsonl"
    again.unlink(missing_ok=True)
    result = repair_to(target, again, chosen)
    assert result.slimmed is not None
    assert not result.slimmed.needed
    assert again.read_bytes() == target.read_bytes()


def test_what_repair_leaves_out_of_the_context_is_not_cut_again(tmp_path: Path) -> None:
    """A compaction kept from a tool result whose call it summarised: repair moves its
    cut forward, which leaves that (long) result out of what pi loads. The slim counts
    what is loaded after repair: it cuts the outputs still sent, not the one already
    gone, and the result is within the budget (it was planned as fitting, then failed
    its verification)."""
    session = Session()
    kept = ""
    for turn in range(6):
        if turn == 4:
            session.compaction(kept, 50_000)
        session.user(f"build step {turn}")
        call = f"toolu_{turn:02d}"
        session.assistant([(call, "bash", {"command": f"make step{turn}"})])
        answer = session.result(call, "bash", output(turn))
        kept = kept or (answer if turn == 1 else "")
        session.assistant([])
    source = tmp_path / "s.jsonl"
    source.write_text(session.text())
    repaired = tmp_path / "repaired.jsonl"
    assert run("repair", "--quiescence", "0", "-o", repaired, source).exit_code == 0
    budget = context_of(repaired).tokens - 3_000
    target = tmp_path / "out.jsonl"
    options = ("--budget", str(budget), "--protect-last-turns", "1")
    slimmed = run("slim", *options, "-o", target, source)
    assert slimmed.exit_code == 0, slimmed.stderr
    assert context_of(target).tokens <= budget
    assert json.dumps(output(1))[1:-1] in target.read_text()


def test_a_size_is_met_by_what_the_agent_never_sends(tmp_path: Path) -> None:
    """A Claude Code session over a size alone: its old `progress` records go, then the
    `toolUseResult` copies of its old outputs are cut; what the agent sends is as it was,
    and the plan, as JSON on stdout, says what each step saved."""
    session = _at_rest(claude_lines(tmp_path / "3f6a9c2e-1b4d-4e7f-8a0c-5d2e7f9b1c3a.jsonl"))
    target = tmp_path / "out.jsonl"
    result = run("slim", "--max-size", "300KB", "-o", target, "--output-format", "json", session)
    assert result.exit_code == 0, result.stderr
    [plan] = json.loads(result.stdout)
    steps = {step["step"]: step for step in plan["steps"]}
    assert list(steps) == ["bookkeeping", "kept-copy"]
    assert steps["bookkeeping"]["count"] == steps["kept-copy"]["count"] == 8
    assert all(step["tokens_saved"] == 0 < step["bytes_saved"] for step in steps.values())
    size = target.stat().st_size
    assert plan["after"] == {"tokens": plan["before"]["tokens"], "bytes": size}
    assert plan["before"]["bytes"] - sum(step["bytes_saved"] for step in steps.values()) == size
    assert (plan["budget"], plan["max_size"], plan["fits"]) == (None, 300_000, True)
    assert "KiB saved." in result.stderr
    before, after = context_of(session), context_of(target)
    assert (after.tokens, after.messages) == (before.tokens, before.messages)
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert sum(record["type"] == "progress" for record in records) == 2


def test_the_plan_as_json_goes_to_stdout(tmp_path: Path) -> None:
    """With --output-format json the plan, not repair's findings, is the machine output:
    of a diff, and of a written slim."""
    session = _at_rest(pi_session(tmp_path / "s.jsonl"))
    for how in (("--diff",), ("-o", str(tmp_path / "out.jsonl"))):
        result = run("slim", *how, "--budget", str(BUDGET), "--output-format", "json", session)
        assert result.exit_code == 0, result.stderr
        [plan] = json.loads(result.stdout)
        assert plan["filename"] == str(session)
        assert [step["step"] for step in plan["steps"]] == ["tool-output", "media"]
        assert plan["steps"][0]["count"] == 8
        assert plan["before"]["tokens"] == 47_922
        assert plan["after"]["tokens"] <= BUDGET == plan["budget"]
        assert plan["fits"]
        assert "tokens remain" not in result.stderr
    result = run("slim", "--diff", "--budget", "1k", "--output-format", "json-lines", session)
    assert result.exit_code == 2
    assert result.stdout == ""


def test_a_size_nothing_unsent_can_meet_is_refused(tmp_path: Path) -> None:
    """A pi session keeps nothing its agent does not send: no size below what it takes
    can be met without a budget, and nothing is written."""
    session = _at_rest(pi_session(tmp_path / "s.jsonl"))
    before = session.read_bytes()
    result = run("slim", "--in-place", "--max-size", "100KB", session)
    assert result.exit_code == 2
    assert "cannot be brought under 97.7 KiB: " in result.stderr
    assert "(none applies); nothing written" in result.stderr
    assert session.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ((), "needs --budget, --max-size or both"),
        (("--max-size", "lots"), "is no size"),
        (("--max-size", "1MB", "--model", "gpt-5"), "--model goes with --budget"),
        (("--budget", "1k", "--output-format", "sarif"), "prints its plan as"),
    ],
)
def test_slim_options_that_say_nothing_it_can_do(
    tmp_path: Path, options: tuple[str, ...], said: str
) -> None:
    session = pi_session(tmp_path / "s.jsonl")
    result = run("slim", "--diff", *options, session)
    assert result.exit_code == 2
    assert said in result.stderr


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=rollouts(corrupt=False))
def test_a_slim_to_a_size_leaves_what_the_agent_loads_as_it_was(
    tmp_path: Path, data: bytes
) -> None:
    """On generated rollouts, compacted and rolled back too: a slim to a byte less than
    the rollout takes either drops what Codex never reads, and Codex loads the same
    messages, the same tokens, from a file within the size, which a second slim leaves
    byte for byte; or it refuses and writes nothing."""
    source = tmp_path / "rollout.jsonl"
    source.write_bytes(data)
    chosen = Settings(quiescence=0.0, max_size=len(data) - 1)
    target = tmp_path / "out.jsonl"
    target.unlink(missing_ok=True)
    try:
        repair_to(source, target, chosen)
    except DoesNotFit:
        assert not target.exists()
        return
    assert target.stat().st_size < len(data)
    before, after = context_of(source), context_of(target)
    assert (after.tokens, after.messages, after.by_sent) == (
        before.tokens,
        before.messages,
        before.by_sent,
    )
    again = tmp_path / "again.jsonl"
    again.unlink(missing_ok=True)
    result = repair_to(target, again, chosen)
    assert result.slimmed is not None
    assert not result.slimmed.needed
    assert again.read_bytes() == target.read_bytes()

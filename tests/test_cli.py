"""The command line, run through typer's CliRunner and through `main(argv)`."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sessionfix import RULES, check_file, cli
from sessionfix.cli import app, main
from sessionfix.engine import CheckRun, check_run
from sessionfix.formats import package_of

from .conftest import FIXTURES

ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
CLEAN = FIXTURES / "SF008-trap-clean-file" / "input.jsonl"
GLUED = FIXTURES / "SF001-glued-assistant-and-user" / "input.jsonl"
CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"
INFO_ONLY = FIXTURES / "SF301-read-then-full-write" / "input.jsonl"


def run(*args: str | Path, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    runner = CliRunner()
    return runner.invoke(app, [str(a) for a in args], env={**ENV, **(env or {})}, color=False)


@pytest.fixture
def sessions_dir(tmp_path: Path) -> Path:
    """A sessions folder with problems, a clean session and sibling artefacts."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    shutil.copy(GLUED, folder / "glued.jsonl")
    shutil.copy(CLEAN, folder / "clean.jsonl")
    nested = folder / "nested"
    nested.mkdir()
    shutil.copy(CLONES, nested / "clones.jsonl")
    (folder / "glued.jsonl.lock").write_text('{"pid": 1}')
    (folder / "abc.trajectory.jsonl").write_text("not a session\n")
    (folder / "abc.jsonl.reset.2026-03-06T05-00-00.000Z").write_text("x")
    (folder / "notes.txt").write_text("ignored")
    return folder


def test_clean_file_passes(tmp_path: Path) -> None:
    result = run("check", CLEAN)
    assert result.exit_code == 0
    assert result.stdout.strip() == "All checks passed!"
    assert result.stderr == ""


def test_problems_exit_one_with_diagnostics_and_a_footer() -> None:
    result = run("check", "--output-format", "concise", GLUED)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"{GLUED}:3:1: SF001 [*] 2 records glued on one line "
        "(assistant message, user message); readers drop the whole line"
    )
    assert lines[-1] == "Found 1 problem (1 fixable with sessionfix repair)."


def test_full_output_shows_an_escaped_excerpt_and_the_fix() -> None:
    result = run("check", GLUED)
    assert result.exit_code == 1
    assert ' 3 | {"type":"message","id":"a0000002"' in result.stdout
    assert "= error · glued-records" in result.stdout
    assert "fix (safe): split into 2 lines" in result.stdout
    assert "\x1b[" not in result.stdout


def test_scan_walks_directories_and_skips_sibling_artefacts(sessions_dir: Path) -> None:
    result = run("scan", "--output-format", "concise", sessions_dir)
    assert result.exit_code == 1
    reported = {line.split(":", 1)[0] for line in result.stdout.splitlines() if ": SF" in line}
    assert reported == {
        str(sessions_dir / "glued.jsonl"),
        str(sessions_dir / "nested" / "clones.jsonl"),
    }
    assert "Scanned 3 files" in result.stderr
    assert "skipped 3 sibling files" in result.stderr
    assert "trajectory" not in result.stdout


def test_scan_of_a_claude_home_reads_only_the_transcripts(tmp_path: Path) -> None:
    """Under ~/.claude only projects/ holds sessions: history.jsonl is the prompt history
    and is neither scanned nor called an invalid session (SF101)."""
    fixtures = Path(__file__).parent / "fixtures"
    home = tmp_path / ".claude"
    project = home / "projects" / "-home-dev-projects-webapp"
    sub_agents = project / "6bdfc9f5-557d-48b8-9655-01686ee5bf9a" / "subagents"
    sub_agents.mkdir(parents=True)
    main_file = project / "6bdfc9f5-557d-48b8-9655-01686ee5bf9a.jsonl"
    shutil.copyfile(fixtures / "SF301-claude-read-then-full-write" / "input.jsonl", main_file)
    agent = sub_agents / "agent-a3f9c01d2e4b5a6c7.jsonl"
    shutil.copyfile(fixtures / "SF009-claude-no-final-newline" / "input.jsonl", agent)
    (sub_agents / "agent-a3f9c01d2e4b5a6c7.meta.json").write_text('{"agentType":"Explore"}\n')
    (home / "history.jsonl").write_text(
        '{"display":"fix the build","pastedContents":{},"timestamp":1784874063547,'
        '"project":"/home/dev/projects/webapp"}\n'
    )
    (home / "todos").mkdir()
    (home / "todos" / "state.jsonl").write_text('{"todos":[]}\n')
    result = run("scan", "--output-format", "concise", "--quiescence", "0", tmp_path)
    reported = {line.split(":", 1)[0] for line in result.stdout.splitlines() if ": SF" in line}
    assert reported == {str(main_file), str(agent)}
    assert "SF101" not in result.stdout
    assert "Scanned 2 files" in result.stderr
    assert "skipped 2 sibling files" in result.stderr


def test_an_openclaw_folder_is_read_by_the_names_openclaw_writes(tmp_path: Path) -> None:
    """A scan reads a session's transcript, its topic's and a fork's, and passes over the
    checkpoint OpenClaw copied before a compaction (it repeats its transcript); named,
    the checkpoint is read under the id of the transcript it copies: no SF101."""
    session = "7a1b2c3d-0000-4000-8000-000000000001"
    checkpoint = f"{session}.checkpoint.0b5c8a6e-1d2f-4a3b-9c8d-7e6f5a4b3c2d.jsonl"
    folder = tmp_path / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    names = [
        f"{session}.jsonl",
        f"{session}-topic-42.jsonl",
        f"2026-07-24T06-21-03-000Z_{session}.jsonl",
    ]
    for name in [*names, checkpoint]:
        shutil.copy(FIXTURES / "SF101-trap-openclaw-topic-file" / "input.jsonl", folder / name)
    scanned = run("scan", "--output-format", "concise", tmp_path)
    assert scanned.exit_code == 0, scanned.stdout
    assert "Scanned 3 files" in scanned.stderr
    assert "skipped 1 sibling file" in scanned.stderr
    named = run("check", "--output-format", "concise", folder / checkpoint)
    assert named.exit_code == 0, named.stdout


def test_json_output_is_machine_readable_and_complete(sessions_dir: Path) -> None:
    result = run("scan", "--output-format", "json", sessions_dir)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [d["code"] for d in data] == ["SF001", "SF201", "SF201"]
    first = data[0]
    assert set(first) == {
        "code",
        "name",
        "severity",
        "message",
        "filename",
        "format",
        "location",
        "end_location",
        "record",
        "entry_id",
        "fix",
        "url",
    }
    assert first["location"] == {"row": 3, "column": 1}
    assert first["record"] == {
        "session": None,
        "record_key": 3,
        "place": f"{first['filename']}:3:1",
    }
    assert first["fix"]["applicability"] == "safe"
    [split] = first["fix"]["edits"]
    assert split["op"] == "replace_bytes"
    assert split["content"] == "\n"
    assert split["byte_column"] == split["end_byte_column"] > 1
    assert "Found" not in result.stdout


def test_json_lines_output(sessions_dir: Path) -> None:
    result = run("scan", "--output-format", "json-lines", sessions_dir)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["code"] for r in rows] == ["SF001", "SF201", "SF201"]


def test_github_annotations_escape_their_properties() -> None:
    result = run("check", "--output-format", "github", GLUED)
    assert result.stdout.startswith(
        f"::error title=sessionfix (SF001),file={GLUED},line=3,col=1::{GLUED}:3:1: SF001 "
    )


def test_sarif_lists_every_rule_and_the_results() -> None:
    result = run("check", "--output-format", "sarif", GLUED)
    document = json.loads(result.stdout)
    run0 = document["runs"][0]
    assert document["version"] == "2.1.0"
    assert len(run0["tool"]["driver"]["rules"]) == len(RULES)
    assert run0["results"][0]["ruleId"] == "SF001"
    assert run0["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 3


@pytest.mark.parametrize("copies", [1, 8])
def test_a_fix_lists_the_lines_its_decisions_change_besides_its_own(
    tmp_path: Path, copies: int
) -> None:
    """Dropping a clone re-links the entry after it: the JSON fix lists that line's edit
    beside the deletion, as `repair --diff --output-format json` does, whether the file
    is checked here or (eight files) in a worker process."""
    for number in range(copies):
        shutil.copy(CLONES, tmp_path / f"clones-{number}.jsonl")
    result = run("scan", "--output-format", "json", "--jobs", "2", tmp_path)
    assert result.exit_code == 1, result.stderr
    fixes = [d["fix"] for d in json.loads(result.stdout)]
    assert len(fixes) == 2 * copies
    for fix in fixes:
        delete, relink = fix["edits"]
        assert delete == {"op": "delete", "row": delete["row"]}
        assert relink["op"] == "replace_bytes"
        assert relink["row"] == delete["row"] + 1
    plan = json.loads(run("repair", "--diff", "--output-format", "json", CLONES).stdout)
    assert {edit["row"] for d in plan for edit in d["fix"]["edits"]} == {
        edit["row"] for fix in fixes[:2] for edit in fix["edits"]
    }


def test_statistics_count_per_rule() -> None:
    result = run("check", "--statistics", CLONES)
    assert result.stdout.splitlines() == ["2\tSF201\t[*] overflow-clone-message"]
    as_json = json.loads(run("check", "--statistics", "--output-format", "json", CLONES).stdout)
    assert as_json == [
        {
            "code": "SF201",
            "name": "overflow-clone-message",
            "count": 2,
            "fixable": True,
            "fixable_count": 2,
        }
    ]


@pytest.mark.parametrize(
    ("options", "excerpts"),
    [
        ((), True),
        (("--output-format", "concise"), False),
        (("--output-format", "json"), False),
        (("--statistics",), False),
        (("--statistics", "--output-format", "full"), False),
    ],
)
def test_the_check_reads_excerpts_only_for_a_report_that_prints_them(
    monkeypatch: pytest.MonkeyPatch, options: tuple[str, ...], excerpts: bool
) -> None:
    asked: list[bool] = []

    def spy(*args: Any, **kwargs: Any) -> CheckRun:
        asked.append(kwargs["excerpts"])
        return check_run(*args, **kwargs)

    monkeypatch.setattr(cli, "check_run", spy)
    assert run("check", *options, GLUED).exit_code == 1
    assert asked == [excerpts]


def test_fail_on_and_exit_zero() -> None:
    assert run("check", INFO_ONLY).exit_code == 0
    assert run("check", "--fail-on", "info", INFO_ONLY).exit_code == 1
    assert run("check", "--fail-on", "error", CLONES).exit_code == 0
    assert run("check", "--exit-zero", GLUED).exit_code == 0


def test_select_and_ignore() -> None:
    assert run("check", "--select", "SF2", GLUED).exit_code == 0
    assert run("check", "--ignore", "SF001", GLUED).exit_code == 0
    result = run("check", "--select", "SF0", "--output-format", "json", GLUED)
    assert [d["code"] for d in json.loads(result.stdout)] == ["SF001"]


def test_unknown_selector_is_a_usage_error() -> None:
    result = run("check", "--select", "SF999", GLUED)
    assert result.exit_code == 2
    assert result.stderr.strip() == "sessionfix: error: unknown rule selector 'SF999'"


def test_unreadable_input_is_reported_and_the_scan_goes_on(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    result = run("check", "--output-format", "concise", missing, GLUED)
    assert result.exit_code == 2
    assert ": SF001 " in result.stdout
    assert result.stdout.rstrip().endswith("; 1 file could not be read.")
    assert result.stderr.strip() == f"sessionfix: error: {missing}: no such file"


def test_nothing_passes_when_nothing_could_be_read(tmp_path: Path) -> None:
    result = run("scan", tmp_path / "missing.jsonl")
    assert result.exit_code == 2
    assert result.stdout == "No problems found; 1 file could not be read.\n"


def test_a_directory_given_to_check_is_an_error(tmp_path: Path) -> None:
    result = run("check", tmp_path)
    assert result.exit_code == 2
    assert "is a directory" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_bad_option_exits_two() -> None:
    result = run("check", "--no-such-option", GLUED)
    assert result.exit_code == 2


def test_permission_denied_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked.jsonl"
    shutil.copy(GLUED, locked)
    real_open = os.open

    def deny(path: object, flags: int, *args: object) -> int:
        if str(path) == str(locked):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", deny)
    result = run("check", locked)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"sessionfix: error: {locked}: permission denied"


def test_a_directory_that_cannot_be_listed_is_one_line(
    sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_scandir = os.scandir
    nested = sessions_dir / "nested"

    def deny(path: object) -> object:
        if str(path) == str(nested):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", deny)
    result = run("scan", "--output-format", "concise", "--no-progress", sessions_dir)
    assert result.exit_code == 2
    assert f"sessionfix: error: {nested}: permission denied" in result.stderr
    assert "glued.jsonl" in result.stdout


def test_a_path_whose_type_cannot_be_read_is_not_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Python 3.11 `Path.is_dir` raises for EACCES instead of answering False."""
    target = tmp_path / "glued.jsonl"
    shutil.copy(GLUED, target)

    def refuse(self: Path) -> bool:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "is_dir", refuse)
    for command in ("check", "scan"):
        result = run(command, "--output-format", "concise", "--no-progress", target)
        assert result.exit_code == 1, result.stderr
        assert "internal error" not in result.stderr
        assert ": SF001 " in result.stdout


def test_readability_is_left_to_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """No usage box from the argument parser's own access check: an unreadable file is
    one line from the reader (see test_permission_denied_is_one_line)."""
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    result = run("check", "--output-format", "concise", GLUED)
    assert result.exit_code == 1
    assert ": SF001 " in result.stdout


def test_session_text_is_escaped_before_printing(tmp_path: Path) -> None:
    """Paths, ids and excerpts come from the session: terminal escapes must not survive."""
    hostile = tmp_path / "hostile.jsonl"
    text = INFO_ONLY.read_text().replace("src/parser.py", "src/\\u001b[31mparser\\u0007.py")
    hostile.write_text(text + "\x1b]0;raw escape on a damaged line\x07\n")
    result = run("check", "--fail-on", "info", hostile)
    assert result.exit_code == 1
    assert "\x1b" not in result.stdout
    assert "\x07" not in result.stdout
    assert "read of 'src/\\x1b[31mparser\\x07.py' is stale" in result.stdout


def test_output_file_keeps_stdout_clean(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    result = run("check", "--output-format", "json", "--output-file", target, GLUED)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert json.loads(target.read_text())[0]["code"] == "SF001"


def test_environment_chooses_the_output_format() -> None:
    result = run("check", GLUED, env={"SESSIONFIX_OUTPUT_FORMAT": "json-lines"})
    assert json.loads(result.stdout.splitlines()[0])["code"] == "SF001"


def test_rule_documentation() -> None:
    result = run("rule", "SF201")
    assert result.exit_code == 0
    assert result.stdout.startswith("# overflow-clone-message (SF201)\n")
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Fix safety"):
        assert section in result.stdout
    by_name = run("rule", "overflow-clone-message")
    assert by_name.stdout == result.stdout


def test_rule_all_and_json() -> None:
    every = run("rule", "--all")
    assert every.stdout.count("## What it does") == len(RULES)
    data = json.loads(run("rule", "--output-format", "json", "SF001").stdout)
    assert data["code"] == "SF001"
    assert data["severity"] == "error"
    assert data["fix"] == "safe"


def test_rule_errors() -> None:
    assert run("rule", "SF999").exit_code == 2
    assert run("rule").exit_code == 2


def test_main_returns_the_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--output-format", "concise", str(GLUED)]) == 1
    out = capsys.readouterr().out
    assert ": SF001 [*] " in out
    assert main(["check", str(CLEAN)]) == 0
    assert main(["check", "--bogus"]) == 2


def test_every_command_has_help() -> None:
    for command in ("scan", "check", "rule"):
        result = run(command, "--help")
        assert result.exit_code == 0
        assert "Usage:" in result.stdout


@pytest.mark.parametrize("command", ["scan", "check", "repair", "context", "restore", "rule"])
@pytest.mark.parametrize("args", [["--help"], ["--bogus"], []])
def test_a_command_run_alone_behaves_as_in_the_whole_app(command: str, args: list[str]) -> None:
    """`main` builds only the command it is asked for; nothing visible may change."""
    from sessionfix.cli import _app_for

    alone = _app_for([command, *args])
    assert alone is not app
    assert len(alone.registered_commands) == 1
    runner = CliRunner()
    whole = runner.invoke(app, [command, *args], env=ENV, color=False)
    trimmed = runner.invoke(alone, [command, *args], env=ENV, color=False)
    assert (trimmed.exit_code, trimmed.stdout, trimmed.stderr) == (
        whole.exit_code,
        whole.stdout,
        whole.stderr,
    )


@pytest.mark.parametrize("args", [[], ["--help"], ["--version"], ["chec"], ["-q", "check"]])
def test_help_options_and_unknown_commands_get_the_whole_app(args: list[str]) -> None:
    from sessionfix.cli import _app_for

    assert _app_for(args) is app


def test_progress_is_only_for_interactive_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    from sessionfix import cli
    from sessionfix.report.render import OutputFormat

    presentation = cli.Presentation(OutputFormat.FULL, None, False, False, False, False)
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    assert not cli._progress_enabled(presentation)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    assert cli._progress_enabled(presentation)
    machine = cli.Presentation(OutputFormat.JSON, None, False, False, False, False)
    assert not cli._progress_enabled(machine)
    quiet = cli.Presentation(OutputFormat.FULL, None, False, True, False, False)
    assert not cli._progress_enabled(quiet)
    monkeypatch.setenv("TERM", "dumb")
    assert not cli._progress_enabled(presentation)


def test_the_demo_folder_shows_every_kind_of_finding() -> None:
    """`make demo` scans examples/sessions: every rule that runs on session files must
    show up there (not those of agents that keep sessions only in a database)."""
    examples = Path(__file__).resolve().parents[1] / "examples" / "sessions"
    result = run("scan", "--output-format", "json", "--quiescence", "0", examples)
    assert result.exit_code == 1
    on_files = {
        rule.code
        for rule in RULES
        if any(package_of(fmt).SUFFIXES for fmt in rule.formats)  # type: ignore[attr-defined]
    }
    assert {d["code"] for d in json.loads(result.stdout)} == on_files
    assert "skipped 3 sibling files" in result.stderr


def test_console_entry_point_flushes_before_exiting() -> None:
    """`run()` skips interpreter teardown; everything written must still arrive."""
    command = "from sessionfix.entry import run; run()"
    args = [sys.executable, "-c", command, "scan", "--output-format", "json", str(GLUED)]
    result = subprocess.run(args, capture_output=True, env={**os.environ, **ENV}, check=False)
    assert result.returncode == 1
    assert [d["code"] for d in json.loads(result.stdout)] == ["SF001"]
    assert result.stderr.decode().startswith("Scanned 1 file")


@pytest.mark.parametrize("output_format", ["full", "concise", "json", "json-lines", "github"])
def test_a_reader_that_stops_reading_does_not_change_the_exit_code(output_format: str) -> None:
    """`sessionfix check f | head -1`: the report is cut short; the exit code still says
    what was found (info only here: 0), and nothing is printed about the pipe."""
    process = subprocess.Popen(
        [sys.executable, "-m", "sessionfix", "check", "--output-format", output_format, INFO_ONLY],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **ENV},
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 0, stderr
    assert b"Traceback" not in stderr
    assert b"error" not in stderr


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_quiescence_must_be_a_finite_number_of_seconds(value: str) -> None:
    result = run("check", "--quiescence", value, GLUED)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "sessionfix: error: --quiescence must be a number of seconds, 0 or more"
    )


def test_colour_is_plain_sgr_around_our_text_never_session_text() -> None:
    from sessionfix.report import render

    found = check_file(INFO_ONLY)
    plain, coloured = io.StringIO(), io.StringIO()
    render.render_human(found, plain, color=False, concise=False, unsafe_fixes=False)
    render.render_human(found, coloured, color=True, concise=False, unsafe_fixes=False)
    assert "\x1b" not in plain.getvalue()
    assert "\x1b[36mSF301\x1b[0m" in coloured.getvalue()
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured.getvalue()) == plain.getvalue()

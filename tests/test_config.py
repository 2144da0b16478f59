"""Configuration files, `--config`, `--isolated`, `--version` and shell completion,
through the command line (typer's CliRunner on `sessionfix.cli.app`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sessionfix import config
from sessionfix.cli import app, main
from sessionfix.version import __version__

from .conftest import FIXTURES

ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
NO_NEWLINE = FIXTURES / "SF009-no-final-newline" / "input.jsonl"
IGNORE_SF009 = '[tool.sessionfix]\nignore = ["SF009"]\n'


def run(*args: str | Path, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    runner = CliRunner()
    return runner.invoke(app, [str(a) for a in args], env={**ENV, **(env or {})}, color=False)


@pytest.fixture(autouse=True)
def _no_output_format_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SESSIONFIX_OUTPUT_FORMAT", raising=False)


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A session whose only finding is SF009 (no final newline), in the current directory."""
    project = tmp_path / "project"
    project.mkdir()
    path = project / "session.jsonl"
    shutil.copyfile(NO_NEWLINE, path)
    monkeypatch.chdir(project)
    return path


def codes(*args: str | Path, env: dict[str, str] | None = None) -> list[str]:
    """The rule codes `check` reports (as JSON, unless the arguments choose otherwise)."""
    result = run("check", "--output-format", "json", *args, env=env)
    assert result.exit_code in (0, 1), result.stderr
    return [d["code"] for d in json.loads(result.stdout)]


def test_pyproject_ignore_is_honoured(session: Path) -> None:
    assert codes(session) == ["SF009"]
    (session.parent / "pyproject.toml").write_text(IGNORE_SF009)
    assert codes(session) == []


def test_the_file_is_found_from_a_subdirectory_upwards(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (session.parent / "pyproject.toml").write_text(IGNORE_SF009)
    deeper = session.parent / "a" / "b"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    assert codes(session) == []


def test_a_pyproject_without_the_table_is_skipped(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (session.parent / "sessionfix.toml").write_text('ignore = ["SF009"]\n')
    inner = session.parent / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.other]\nk = 1\n')
    monkeypatch.chdir(inner)
    assert codes(session) == []
    found = config.find(Path.cwd())
    assert found is not None
    assert found[0] == Path("../sessionfix.toml")


def test_the_nearest_directory_wins(session: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (session.parent / "pyproject.toml").write_text(IGNORE_SF009)
    inner = session.parent / "inner"
    inner.mkdir()
    (inner / "sessionfix.toml").write_text("")  # sessionfix settings: the defaults
    monkeypatch.chdir(inner)
    assert codes(session) == ["SF009"]


def test_precedence_within_one_directory(session: Path) -> None:
    """.sessionfix.toml, then sessionfix.toml, then pyproject.toml (as ruff)."""
    folder = session.parent
    (folder / "pyproject.toml").write_text(IGNORE_SF009)
    (folder / "sessionfix.toml").write_text('select = ["SF009"]\n')
    assert codes(session) == ["SF009"]
    (folder / ".sessionfix.toml").write_text('ignore = ["SF0"]\n')
    assert codes(session) == []


def test_config_names_the_file(session: Path, tmp_path: Path) -> None:
    (session.parent / "pyproject.toml").write_text(IGNORE_SF009)
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text('select = ["SF0"]\n')
    assert codes("--config", elsewhere, session) == ["SF009"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text(IGNORE_SF009)
    (session.parent / "pyproject.toml").unlink()
    assert codes(session) == ["SF009"]
    assert codes("--config", other / "pyproject.toml", session) == []


def test_a_missing_config_file_is_an_error(session: Path) -> None:
    result = run("check", "--config", "nowhere.toml", session)
    assert result.exit_code == 2
    assert result.stderr == (
        "sessionfix: error: nowhere.toml: cannot read (no such file or directory)\n"
    )


def test_isolated_ignores_every_file(session: Path) -> None:
    (session.parent / "pyproject.toml").write_text(IGNORE_SF009)
    assert codes("--isolated", session) == ["SF009"]
    result = run("check", "--isolated", "--config", "pyproject.toml", session)
    assert result.exit_code == 2
    assert result.stderr == "sessionfix: error: --config and --isolated cannot be combined\n"


def test_the_command_line_overrides_the_file(session: Path) -> None:
    (session.parent / "pyproject.toml").write_text(
        '[tool.sessionfix]\nignore = ["SF009"]\nfail-on = "info"\noutput-format = "concise"\n'
    )
    assert codes("--ignore", "SF001", session) == ["SF009"]  # a list replaces the file's
    plain = run("check", session)
    assert plain.exit_code == 0
    assert plain.stdout == "All checks passed!\n"  # concise, from the file
    strict = run("check", "--ignore", "SF001", session)
    assert strict.exit_code == 1  # fail-on info, from the file
    assert strict.stdout.startswith(f"{session}:3:1: SF009 ")
    assert run("check", "--ignore", "SF001", "--fail-on", "warning", session).exit_code == 0


def test_output_format_comes_from_the_command_line_then_the_environment_then_the_file(
    session: Path,
) -> None:
    (session.parent / "sessionfix.toml").write_text('output-format = "json"\n')
    assert json.loads(run("check", session).stdout)[0]["code"] == "SF009"
    from_env = run("check", session, env={"SESSIONFIX_OUTPUT_FORMAT": "concise"})
    assert from_env.stdout.startswith(f"{session}:3:1: SF009 ")
    from_cli = run(
        "check", "--output-format", "json-lines", session, env={"SESSIONFIX_OUTPUT_FORMAT": "full"}
    )
    assert json.loads(from_cli.stdout.splitlines()[0])["code"] == "SF009"


def test_extend_select_adds_to_the_file_and_select_starts_afresh(session: Path) -> None:
    (session.parent / "sessionfix.toml").write_text(
        'select = ["SF001"]\nextend-select = ["SF009"]\n'
    )
    assert codes(session) == ["SF009"]
    assert codes("--extend-select", "SF002", session) == ["SF009"]
    assert codes("--select", "SF001", session) == []
    assert codes("--select", "SF001", "--extend-select", "SF009", session) == ["SF009"]


def test_unsafe_fixes_from_the_file_can_be_turned_off(session: Path) -> None:
    given = {"unsafe_fixes": None, "select": None, "extend_select": None}
    on = config.Config(Path("sessionfix.toml"), {"unsafe_fixes": True})
    assert config.resolve(given, on)["unsafe_fixes"] is True
    assert config.resolve({**given, "unsafe_fixes": False}, on)["unsafe_fixes"] is False
    assert config.resolve(given, config.Config())["unsafe_fixes"] is False
    (session.parent / "sessionfix.toml").write_text("unsafe-fixes = true\n")
    assert run("check", "--no-unsafe-fixes", session).exit_code == 0


def test_repair_honours_the_file(session: Path) -> None:
    before = session.read_bytes()
    assert run("repair", "--diff", session).exit_code == 1  # a newline would be added
    (session.parent / "pyproject.toml").write_text(IGNORE_SF009)
    result = run("repair", "--diff", session)
    assert result.exit_code == 0
    assert result.stdout == ""
    assert session.read_bytes() == before


def test_scan_honours_the_file(session: Path) -> None:
    (session.parent / "pyproject.toml").write_text(IGNORE_SF009)
    result = run("scan", "--output-format", "json", ".")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == []


def test_an_unknown_key_is_one_line_and_exit_2(session: Path) -> None:
    (session.parent / "pyproject.toml").write_text('[tool.sessionfix]\nselct = ["SF009"]\n')
    result = run("check", session)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert (
        result.stderr
        == "sessionfix: error: pyproject.toml: [tool.sessionfix] unknown key 'selct'\n"
    )


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ('ignore = "SF009"', "'ignore' must be a list of strings"),
        ("ignore = [9]", "'ignore' must be a list of strings"),
        ('unsafe-fixes = "yes"', "'unsafe-fixes' must be true or false"),
        ("jobs = 1.5", "'jobs' must be an integer"),
        ("jobs = true", "'jobs' must be an integer"),
        ('quiescence = "10"', "'quiescence' must be a number of seconds"),
        ("cwd = 3", "'cwd' must be a string"),
    ],
)
def test_a_wrong_type_is_one_line_and_exit_2(session: Path, setting: str, message: str) -> None:
    (session.parent / "sessionfix.toml").write_text(setting + "\n")
    result = run("check", session)
    assert result.exit_code == 2
    assert result.stderr == f"sessionfix: error: sessionfix.toml: {message}\n"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ('select = ["SF999"]', "'select' names an unknown rule selector 'SF999'"),
        ('extend-select = ["bogus"]', "'extend-select' names an unknown rule selector 'bogus'"),
        ('fail-on = "fatal"', "'fail-on' must be one of error, warning, info (not 'fatal')"),
        (
            'format = "unknown"',
            "'format' must be one of auto, pi, openclaw, codex, claude (not 'unknown')",
        ),
        ("jobs = 0", "'jobs' must be 1 or more"),
        ("max-record-size = 0", "'max-record-size' must be 1 or more"),
        ("protect-last-turns = -1", "'protect-last-turns' must be 0 or more"),
        ("quiescence = -1", "'quiescence' must be a number of seconds, 0 or more"),
        ("quiescence = nan", "'quiescence' must be a number of seconds, 0 or more"),
    ],
)
def test_an_invalid_value_is_one_line_and_exit_2(session: Path, setting: str, message: str) -> None:
    (session.parent / "pyproject.toml").write_text(f"[tool.sessionfix]\n{setting}\n")
    result = run("check", session)
    assert result.exit_code == 2
    assert result.stderr == f"sessionfix: error: pyproject.toml: [tool.sessionfix] {message}\n"


def test_invalid_toml_is_one_line_and_exit_2(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (session.parent / "sessionfix.toml").write_text("ignore = [\n")
    inner = session.parent / "inner"
    inner.mkdir()
    monkeypatch.chdir(inner)
    result = run("check", session)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("sessionfix: error: ../sessionfix.toml: invalid TOML (")


def test_valid_values_reach_the_settings(tmp_path: Path) -> None:
    path = tmp_path / "sessionfix.toml"
    path.write_text(
        'select = ["sf2", "SF301"]\nprotect = ["docs/**"]\nprotect-last-turns = 2\n'
        'max-record-size = 1024\nquiescence = 3\ncwd = "/src"\nformat = "Pi"\njobs = 2\n'
    )
    found = config.load(tmp_path, explicit=path)
    assert found.path == path
    assert found.values == {
        "select": ("SF2", "SF301"),
        "protect": ("docs/**",),
        "protect_last_turns": 2,
        "max_record_size": 1024,
        "quiescence": 3.0,
        "cwd": "/src",
        "session_format": "pi",
        "jobs": 2,
    }


def test_isolated_and_an_explicit_pyproject_without_the_table_mean_the_defaults(
    tmp_path: Path,
) -> None:
    (tmp_path / "sessionfix.toml").write_text("jobs = 2\n")
    assert config.load(tmp_path, isolated=True) == config.Config()
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    assert config.load(tmp_path, explicit=pyproject).values == {}


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout == f"sessionfix {__version__}\n"


def test_version_through_main(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"sessionfix {__version__}\n"


def test_help_lists_version_and_completion() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for option in ("--version", "--install-completion", "--show-completion"):
        assert option in result.stdout


def test_completion_script_for_bash(monkeypatch: pytest.MonkeyPatch) -> None:
    # As typer's own tests: without shell detection, --show-completion takes the shell.
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    result = CliRunner().invoke(app, ["--show-completion", "bash"], prog_name="sessionfix")
    assert result.exit_code == 0, result.output
    script = result.stdout
    assert "complete -o default -F _sessionfix_completion sessionfix" in script
    assert "_SESSIONFIX_COMPLETE=complete_bash" in script


def test_a_config_file_that_is_not_utf8_is_one_line_and_exit_2(session: Path) -> None:
    (session.parent / "sessionfix.toml").write_bytes(b"jobs = 2 # \xff\n")
    result = run("check", session)
    assert result.exit_code == 2
    assert result.stderr == "sessionfix: error: sessionfix.toml: invalid TOML (not UTF-8 text)\n"


@pytest.mark.parametrize(
    "value", ["[" * 100_000 + "]" * 100_000, "{a = " * 100_000 + "1" + "}" * 100_000]
)
def test_a_config_file_nested_too_deeply_is_one_line_and_exit_2(session: Path, value: str) -> None:
    (session.parent / "pyproject.toml").write_text(f"[tool.sessionfix]\nselect = {value}\n")
    result = run("check", session)
    assert result.exit_code == 2
    assert result.stderr == (
        "sessionfix: error: pyproject.toml: invalid TOML (arrays or tables nested too deeply)\n"
    )

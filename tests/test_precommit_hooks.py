"""The hooks of `.pre-commit-hooks.yaml`, run by pre-commit itself (`try-repo` on this
checkout, which installs sessionfix into pre-commit's own environment from PyPI): the
check hook fails on a damaged session and leaves it alone; the repair hook fails once,
rewriting it, and both pass after that."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import FIXTURES, ROOT

GLUED = FIXTURES / "SF001-glued-assistant-and-user" / "input.jsonl"
NO_NEWLINE = FIXTURES / "SF009-no-final-newline" / "input.jsonl"


def _git(repo: Path, *args: str, env: dict[str, str]) -> None:
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _hooks(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Every hook of the manifest, in its order (check, then repair), in one run: one
    environment to install."""
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "--all-files"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _sections(output: str) -> dict[str, str]:
    """What pre-commit printed for each hook, by hook id."""
    parts = output.split("- hook id: ")[1:]
    return {part.split("\n", 1)[0].strip(): part for part in parts}


def test_the_hooks_check_then_repair_a_damaged_session(tmp_path: Path) -> None:
    assert (ROOT / ".git").exists(), "try-repo needs this checkout to be a git repository"
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "GIT_AUTHOR_NAME": "test",
        "GIT_AUTHOR_EMAIL": "test@example.org",
        "GIT_COMMITTER_NAME": "test",
        "GIT_COMMITTER_EMAIL": "test@example.org",
        "NO_COLOR": "1",
    }
    env.pop("PYTHONPATH", None)
    repo = tmp_path / "repo"
    repo.mkdir()
    glued = repo / "sessions" / "glued.jsonl"
    unterminated = repo / "unterminated.jsonl"
    glued.parent.mkdir()
    shutil.copy(GLUED, glued)
    shutil.copy(NO_NEWLINE, unterminated)
    (repo / "notes.txt").write_bytes(b"not a session\n")
    _git(repo, "init", "-q", env=env)
    _git(repo, "add", ".", env=env)
    _git(repo, "commit", "-q", "--no-gpg-sign", "-m", "sessions", env=env)
    damaged = {path: path.read_bytes() for path in (glued, unterminated)}

    first = _hooks(repo, env)
    assert first.returncode == 1, first.stdout + first.stderr
    sections = _sections(first.stdout)
    assert set(sections) == {"sessionfix", "sessionfix-repair"}, first.stdout
    assert "SF001" in sections["sessionfix"]
    assert "files were modified" not in sections["sessionfix"]
    assert "files were modified by this hook" in sections["sessionfix-repair"]
    assert glued.read_bytes() != damaged[glued]
    assert glued.read_bytes().count(b"\n") == damaged[glued].count(b"\n") + 1
    assert unterminated.read_bytes() == damaged[unterminated] + b"\n"
    assert sorted(path.name for path in repo.rglob("*") if ".git" not in path.parts) == [
        "glued.jsonl",
        "notes.txt",
        "sessions",
        "unterminated.jsonl",
    ], "no backup files beside the sessions"

    again = _hooks(repo, env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("Passed") == 2, again.stdout

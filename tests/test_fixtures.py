"""Golden fixtures: one hand-written session per rule case and per trap.

Each `tests/fixtures/<CODE>-<case>/` holds `input.jsonl`, `diagnostics.json` (the
expected diagnostics, as the JSON output format prints them, without the file name)
and optionally `case.json` with the settings and file name to check under, and an
`expect` map (code → the lines it must be reported on, exactly) written from the spec
independently of the goldens; and optionally a `beside/` folder of the files that lie
around the session where it is checked (a sub-agent transcript's main session). A case
whose name contains `-trap-` must not produce its rule's code; any other case must.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessionfix import Settings, check_file
from sessionfix.formats import Format
from sessionfix.repair.plan import described_fixes
from sessionfix.repair.targets import repair_to
from sessionfix.report.render import diagnostic_json

from .conftest import FIXTURES

CASES = sorted(path for path in FIXTURES.iterdir() if path.is_dir())
_TUPLE_SETTINGS = {"select", "ignore", "extend_select", "protect"}


def _settings(spec: dict[str, Any]) -> Settings:
    values: dict[str, Any] = {"quiescence": 0.0}
    for key, value in spec.get("settings", {}).items():
        if key in _TUPLE_SETTINGS:
            value = tuple(value)
        if key == "format":
            value = Format(value)
        values[key] = value
    return Settings(**values)


def _golden_view(diagnostic: Any) -> dict[str, Any]:
    data = diagnostic_json(diagnostic)
    assert data["record"]["record_key"] == data["location"]["row"], "a file's record is its line"
    del data["filename"], data["url"], data["record"]
    return data


def place_case(case: Path, root: Path) -> Path:
    """Copy a case's input to `root` under the file name its `case.json` gives, and its
    `beside/` files to the same places under `root`; the input's copy."""
    spec_file = case / "case.json"
    spec = json.loads(spec_file.read_text()) if spec_file.exists() else {}
    target = root / spec.get("filename", "session.jsonl")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(case / "input.jsonl", target)
    beside = case / "beside"
    if beside.is_dir():
        shutil.copytree(beside, root, dirs_exist_ok=True)
    return target


def run_case(case: Path, tmp_path: Path) -> list[dict[str, Any]]:
    spec_file = case / "case.json"
    spec = json.loads(spec_file.read_text()) if spec_file.exists() else {}
    target = place_case(case, tmp_path)
    found = check_file(target, _settings(spec), describe=described_fixes)
    return [_golden_view(d) for d in found]


def test_every_rule_has_a_case_and_a_trap() -> None:
    from sessionfix import RULES

    names = [case.name for case in CASES]
    for rule in RULES:
        hits = [n for n in names if n.startswith(rule.code + "-") and "-trap-" not in n]
        traps = [n for n in names if n.startswith(rule.code + "-trap-")]
        assert hits, f"{rule.code} has no fixture case"
        assert traps, f"{rule.code} has no trap fixture"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_fixture(case: Path, tmp_path: Path, update_goldens: bool) -> None:
    actual = run_case(case, tmp_path)
    golden = case / "diagnostics.json"
    if update_goldens:
        golden.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
    assert golden.exists(), f"{golden} is missing: run pytest --update-goldens and review it"
    expected = json.loads(golden.read_text())
    assert actual == expected
    spec_file = case / "case.json"
    spec = json.loads(spec_file.read_text()) if spec_file.exists() else {}
    for expected_code, rows in spec.get("expect", {}).items():
        found = sorted(d["location"]["row"] for d in actual if d["code"] == expected_code)
        assert found == sorted(rows), f"{case.name}: {expected_code} on lines {found}"
    code = case.name.split("-", 1)[0]
    codes = {d["code"] for d in actual}
    if "-trap-" in case.name:
        assert code not in codes, f"trap case {case.name} reports {code}"
    else:
        assert code in codes, f"case {case.name} does not report {code}"


def repair_case(case: Path, tmp_path: Path, *, unsafe: bool) -> bytes:
    """The repaired bytes of a case's input (safe fixes, or with --unsafe-fixes)."""
    spec_file = case / "case.json"
    spec = json.loads(spec_file.read_text()) if spec_file.exists() else {}
    target = place_case(case, tmp_path)
    settings = msgspec.structs.replace(_settings(spec), unsafe_fixes=unsafe)
    output = tmp_path / ("unsafe.out" if unsafe else "safe.out")
    repair_to(target, output, settings)
    return output.read_bytes()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_fixture_repair(case: Path, tmp_path: Path, update_goldens: bool) -> None:
    """Repair goldens: `repaired.jsonl` (safe fixes) and `repaired-unsafe.jsonl` (with
    unsafe fixes), each stored only when it differs from the file it would follow
    (the input, then the safe repair). A trap's repair never touches its rule's lines."""
    original = (case / "input.jsonl").read_bytes()
    safe = repair_case(case, tmp_path, unsafe=False)
    unsafe = repair_case(case, tmp_path, unsafe=True)
    for name, actual, baseline in (
        ("repaired.jsonl", safe, original),
        ("repaired-unsafe.jsonl", unsafe, safe),
    ):
        golden = case / name
        if update_goldens:
            if actual != baseline:
                golden.write_bytes(actual)
            elif golden.exists():
                golden.unlink()
        expected = golden.read_bytes() if golden.exists() else baseline
        assert actual == expected, f"{case.name}: {name} differs (review with --update-goldens)"

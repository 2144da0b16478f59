"""The package layout: one folder per pipeline stage, imports pointing only down.

The import graph of `src/sessionfix` is read statically (each module parsed with
`ast`), so the check sees every `sessionfix` import: at module level, inside
functions, and under `if TYPE_CHECKING:`. A lazy import (one inside a function) is
there to keep start-up fast, never to hide an upward dependency: it obeys the same
rule as any other import.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Final

import pytest

PACKAGE: Final = Path(__file__).resolve().parent.parent / "src" / "sessionfix"

STAGES: Final[tuple[tuple[str, ...], ...]] = (
    ("errors", "escapes", "interrupts", "jsonutil", "location", "structs", "units", "version"),
    ("scratch",),
    ("read", "stores"),
    ("model",),
    ("formats",),
    ("diagnostics", "discovery"),
    ("containers",),
    ("settings",),
    ("safety",),
    ("scan",),
    ("rules",),
    ("engine",),
    ("repair",),
    ("context",),
    ("report",),
    ("config", "distributed"),
    ("__init__", "cli"),
    ("entry",),
    ("__main__",),
)
"""The stages, lowest first. A module may import from its own folder (or itself) and from
any stage below its own; never from a stage at its level or above. The top-level modules
are stages of their own, placed by what they need: the shared vocabulary (errors, held
signals, JSON, record classes, units) at the bottom, private temporary folders just above
it; findings and discovery above the formats they name, the containers that hold sessions
and locate their findings above them; the safety layer below the scan
and below the rules, which ask it whether a writer holds a file; what the agent loads
above the repair it measures the result of; the configuration files above the report,
whose output formats they name; the cluster check beside them, above the report whose
JSON diagnostics its results carry."""

LEVEL: Final = {unit: level for level, units in enumerate(STAGES) for unit in units}

KNOWN_UPWARD: Final[frozenset[tuple[str, str]]] = frozenset()
"""Upward imports not yet removed, as (module, imported module)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    """Whether `name` (dotted, under sessionfix) is a module or package of the source."""
    relative = Path(*name.split("."))
    base = PACKAGE.parent / relative
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _unit(name: str) -> str:
    """The stage unit a `sessionfix…` module belongs to: its top-level folder or module."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(source: str, module: str, *, is_package: bool) -> list[tuple[str, int, str]]:
    """Every `sessionfix` module that `module` imports: (module, line, the import as
    written); wherever the import stands (module level, function, TYPE_CHECKING)."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[str, int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sessionfix" or alias.name.startswith("sessionfix."):
                    found.append((alias.name, node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target != "sessionfix" and not target.startswith("sessionfix."):
                continue
            written = ast.unparse(node)
            for alias in node.names:
                # `from sessionfix.x import y` imports the submodule y when there is one.
                submodule = f"{target}.{alias.name}"
                found.append((submodule if _is_module(submodule) else target, node.lineno, written))
    return found


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _upward() -> list[tuple[str, str, str]]:
    """(module, imported module, message) for every import that does not point down."""
    bad = []
    for path in _sources():
        module = _module_name(path)
        here = _unit(module)
        imports = _imports(path.read_text(), module, is_package=path.name == "__init__.py")
        for target, line, written in imports:
            there = _unit(target)
            if there == here:
                continue
            if LEVEL[there] < LEVEL[here]:
                continue
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            message = (
                f"{where}: {module} ({here}, stage {LEVEL[here]}) imports {target} "
                f"({there}, stage {LEVEL[there]}): `{written}`"
            )
            bad.append((module, target, message))
    return bad


def test_every_module_belongs_to_a_stage() -> None:
    units = {_unit(_module_name(path)) for path in _sources()}
    unplaced = sorted(units - LEVEL.keys())
    assert not unplaced, f"modules or folders in no stage of STAGES: {unplaced}"


def test_imports_point_down() -> None:
    bad = [message for module, target, message in _upward() if (module, target) not in KNOWN_UPWARD]
    assert not bad, "imports from a stage at or above the importer's:\n" + "\n".join(bad)


def test_known_upward_imports_still_exist() -> None:
    """An upward import that is gone comes off the list."""
    stale = KNOWN_UPWARD - {(module, target) for module, target, _ in _upward()}
    assert not stale, f"no longer imported, remove from KNOWN_UPWARD: {sorted(stale)}"


def test_the_check_sees_lazy_relative_and_type_checking_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from sessionfix.repair.plan import RepairPlan\n"
        "def f():\n"
        "    from sessionfix.report import render\n"
        "    import sessionfix.cli\n"
        "from ..engine import check_file\n"
        "from . import reader\n"
    )
    found = {target for target, _, _ in _imports(source, "sessionfix.read.x", is_package=False)}
    assert found == {
        "sessionfix.repair.plan",
        "sessionfix.report.render",
        "sessionfix.cli",
        "sessionfix.engine",
        "sessionfix.read.reader",
    }
    assert all(
        LEVEL[_unit(target)] > LEVEL["read"] for target in found - {"sessionfix.read.reader"}
    )


# ---- the two acceptance greps --------------------------------------------------------

FIELD_NAMES: Final = re.compile(
    r'"(parentId|parentUuid|logicalParentUuid|firstKeptEntryId|targetId|uuid|call_id)"'
)


def test_only_formats_spell_link_fields() -> None:
    """`grep -rnE '"(parentId|…|call_id)"' src/sessionfix | grep -v /formats/` is empty."""
    hits = []
    for path in _sources():
        if "formats" in path.relative_to(PACKAGE).parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if FIELD_NAMES.search(line):
                hits.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert not hits, "a format's field name outside formats/:\n" + "\n".join(hits)


RULE_CODE: Final = re.compile(r"SF[0-9]{3}")


def _prose(tree: ast.AST) -> set[int]:
    """ids of the string constants meant for people, not for code: docstrings (any
    bare string statement), `help=` texts and the messages of raised exceptions."""
    allowed: set[int] = set()

    def take(node: ast.AST) -> None:
        allowed.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Constant))

    for node in ast.walk(tree):
        docstring = isinstance(node, ast.Expr) and isinstance(
            node.value, (ast.Constant, ast.JoinedStr)
        )
        if docstring or (isinstance(node, ast.keyword) and node.arg == "help"):
            take(node.value)
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            for argument in node.exc.args:
                take(argument)
    return allowed


def _rule_codes_in_code(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    prose = _prose(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in prose
        and RULE_CODE.search(node.value)
    ]


def test_only_rules_name_rule_codes() -> None:
    """Outside rules/, a rule code appears only in docstrings, comments, help texts
    and error messages: no module decides anything by rule code."""
    hits = []
    for path in _sources():
        if "rules" in path.relative_to(PACKAGE).parts:
            continue
        for line, value in _rule_codes_in_code(path.read_text()):
            hits.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {value!r}")
    assert not hits, "a rule code in code outside rules/:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "source",
    [
        'def plan(code):\n    if code == "SF006":\n        return 1\n',
        'ORDER = {"SF201": 0}\n',
        'def f(d):\n    return d.code in ("SF103", "SF105")\n',
        'def f(code):\n    return f"{code}" == f"SF{6:03}" or code.startswith("SF107")\n',
    ],
)
def test_rule_codes_in_code_are_found(source: str) -> None:
    assert _rule_codes_in_code(source)


@pytest.mark.parametrize(
    "source",
    [
        '"""Drops what SF201 finds."""\n',
        "x = 1  # SF201 again\n",
        'def f():\n    """SF002 waits."""\n',
        'opt = Option(help="SF301: keep stale reads")\n',
        'def f(s):\n    raise ValueError(f"bad {s} (expected a code such as SF201)")\n',
    ],
)
def test_rule_codes_in_prose_are_allowed(source: str) -> None:
    assert not _rule_codes_in_code(source)

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
    (
        "errors",
        "escapes",
        "interrupts",
        "jsonutil",
        "location",
        "media",
        "registry",
        "structs",
        "units",
        "version",
    ),
    ("replacing", "scratch"),
    ("read", "stores"),
    ("model",),
    ("formats",),
    ("diagnostics", "discovery"),
    ("settings",),
    ("safety",),
    ("containers",),
    ("scan",),
    ("rules",),
    ("engine",),
    ("slim",),
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
signals, JSON, record classes, units, inline media measured from their base64, the registry
of format packages) at the bottom,
private temporary folders and the steps of a safe rewrite of a file (which need only the
errors) just above it; findings and discovery above the formats they
name, the containers that hold sessions and locate their findings above them; the safety
layer below the scan and below the rules, which ask it whether a writer holds a file; the
reductions a slim plans below the repair that applies them; what
the agent loads above the repair it measures the result of; the configuration files above
the report, whose output formats they name; the cluster check beside them, above the
report whose JSON diagnostics its results carry."""

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


def _import_graph() -> dict[str, set[str]]:
    """Each module of the package → the modules of the package it imports (itself left out)."""
    graph: dict[str, set[str]] = {}
    for path in _sources():
        module = _module_name(path)
        imports = _imports(path.read_text(), module, is_package=path.name == "__init__.py")
        graph[module] = {target for target, _, _ in imports if target != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph`: each set of modules that reach one another, sorted
    (Tarjan's strongly connected components, iteratively)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in order:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root] & graph.keys()))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            if targets:
                target = targets.pop()
                if target not in order:
                    order[target] = low[target] = len(order)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, sorted(graph[target] & graph.keys())))
                elif target in on_stack:
                    low[node] = min(low[node], order[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == order[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_no_import_cycles() -> None:
    """No module imports, however indirectly, one that imports it: not at module level,
    nor inside a function or under TYPE_CHECKING, where an import would only hide the
    cycle (within a folder as between folders)."""
    cycles = _cycles(_import_graph())
    assert not cycles, "modules that import one another:\n" + "\n".join(
        " ↔ ".join(cycle) for cycle in cycles
    )


def test_the_cycle_check_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": {"f"}}
    assert _cycles(graph) == [["a", "b", "c"], ["d", "e"]]
    assert _cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


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
    r'"(parentId|parentUuid|logicalParentUuid|firstKeptEntryId|targetId|uuid|call_id'
    r"|sessionId|toolCallId|tool_use_id|customType|leafId|partialJson|session_meta"
    r'|response_item)"'
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


def _format_names() -> frozenset[str]:
    """The name of every format a registered package reads (`pi`, `openclaw`...)."""
    from sessionfix.formats import session_formats

    return frozenset(fmt.value for fmt in session_formats())


_WORD: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")


def _words(identifier: str) -> set[str]:
    """`is_openclaw_location` → {is, openclaw, location}; `PI_FORMATS` → {pi, formats}."""
    return {word.lower() for part in re.split(r"[._]", identifier) for word in _WORD.findall(part)}


def _identifiers(node: ast.AST) -> list[str]:
    """The names `node` defines, binds or reads (a dotted module path whole)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg] if node.arg else []
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names] + [a.asname for a in node.names if a.asname]
    if isinstance(node, ast.ImportFrom):
        return [node.module or "", *(alias.asname or alias.name for alias in node.names)]
    return []


def _format_names_in_code(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """Where code outside `formats/` decides by a format: an identifier with a format's
    name among its words (`Format.PI`, `is_openclaw_location`, an import of a format
    package), or a string that is a format's name or a format package's module path
    (loaded by name). Docstrings, help texts and error messages may name formats."""
    tree = ast.parse(source)
    prose = _prose(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        for identifier in _identifiers(node):
            if _words(identifier) & names:
                found.append((getattr(node, "lineno", 0), identifier))
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in prose
            and (node.value.lower() in names or node.value.startswith("sessionfix.formats."))
        ):
            found.append((node.lineno, repr(node.value)))
    return found


def test_only_formats_and_the_registry_name_formats() -> None:
    """Adding a format is a package under formats/ and a line in the registry: nothing
    else names one (the CLI, discovery, the rules, the locks read its declarations)."""
    names = _format_names()
    hits = []
    for path in _sources():
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "formats" or relative == Path("registry.py"):
            continue
        for line, value in _format_names_in_code(path.read_text(), names):
            hits.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {value}")
    assert not hits, "a format named outside formats/:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "source",
    [
        "from sessionfix.formats.pi.location import is_openclaw_location\n",
        "def f(fmt):\n    return fmt is Format.OPENCLAW\n",
        "PI_FORMATS = frozenset()\n",
        "def f(fmt):\n    return fmt.is_pi_family\n",
        'AGENTS = {"codex": "Codex"}\n',
        'STORES = ("sessionfix.formats.openclaw_store",)\n',
        "def rewrite(openclaw: bool):\n    pass\n",
        "lock = claudeLock\n",
    ],
)
def test_format_names_in_code_are_found(source: str) -> None:
    assert _format_names_in_code(source, _format_names())


@pytest.mark.parametrize(
    "source",
    [
        '"""pi keeps it as an entry."""\n',
        "x = 1  # OpenClaw's lock\n",
        'message = f"{agent} loads {count} messages"\n',
        'opt = Option(help="pi or openclaw")\n',
        "def pick(pipeline, epic, openly):\n    return pipeline\n",
        'raise ValueError("not a Codex rollout")\n',
    ],
)
def test_words_that_only_contain_a_format_name_are_allowed(source: str) -> None:
    assert not _format_names_in_code(source, _format_names())


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

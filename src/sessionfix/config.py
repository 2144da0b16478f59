"""Configuration files: `[tool.sessionfix]` in pyproject.toml, or sessionfix.toml.

Found as ruff finds its own: from the current directory upwards, the first directory
with sessionfix settings wins, and within one directory `.sessionfix.toml` comes before
`sessionfix.toml`, which comes before a `pyproject.toml` holding `[tool.sessionfix]`.
Values are checked here, so that a mistake is one line naming the file and the key;
the command line then overrides them (`resolve`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from msgspec import Struct, field

from sessionfix.errors import UsageError, described
from sessionfix.formats import Format
from sessionfix.report.render import OutputFormat
from sessionfix.rules import RULES
from sessionfix.settings import DEFAULT_MAX_RECORD_SIZE, DEFAULT_QUIESCENCE

PYPROJECT: Final = "pyproject.toml"
CANDIDATES: Final = (".sessionfix.toml", "sessionfix.toml", PYPROJECT)
"""File names looked for in each directory, in order of precedence."""

_SELECTOR: Final = re.compile(r"^(ALL|SF\d{0,3})$")


class ConfigError(UsageError):
    """A configuration file that cannot be read or holds a wrong key or value."""


def _selectors(value: object) -> tuple[str, ...]:
    codes = [rule.code for rule in RULES]
    found = []
    for item in _strings(value):
        selector = item.strip().upper()
        if not _SELECTOR.match(selector) or not (
            selector == "ALL" or any(code.startswith(selector) for code in codes)
        ):
            raise ValueError(f"names an unknown rule selector {item!r}")
        found.append(selector)
    return tuple(found)


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError("must be a list of strings")
    return tuple(value)


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError("must be true or false")
    return value


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("must be a string")
    return value


def _integer(minimum: int) -> Callable[[object], int]:
    def check(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("must be an integer")
        if value < minimum:
            raise ValueError(f"must be {minimum} or more")
        return value

    return check


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("must be a number of seconds")
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a number of seconds, 0 or more")
    return float(value)


def _choice(values: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        text = _text(value).lower()
        if text not in values:
            raise ValueError(f"must be one of {', '.join(values)} (not {value!r})")
        return text

    return check


def format_name(value: object) -> str:
    """A session format's name: auto, or one a registered format package reads."""
    from sessionfix.formats import session_formats

    return _choice((Format.AUTO.value, *(fmt.value for fmt in session_formats())))(value)


class Key(Struct, frozen=True):
    """One setting a file may hold: the command-line option it stands for, how its
    value is checked, and the value when neither the file nor the command line sets it."""

    option: str
    check: Callable[[object], object]
    default: object = None


KEYS: Final[Mapping[str, Key]] = {
    "select": Key("select", _selectors),
    "extend-select": Key("extend_select", _selectors),
    "ignore": Key("ignore", _selectors),
    "fail-on": Key("fail_on", _choice(("error", "warning", "info")), "warning"),
    "output-format": Key(
        "output_format", _choice(tuple(f.value for f in OutputFormat)), OutputFormat.FULL.value
    ),
    "unsafe-fixes": Key("unsafe_fixes", _boolean, False),
    "extend-safe-fixes": Key("extend_safe_fixes", _selectors),
    "extend-unsafe-fixes": Key("extend_unsafe_fixes", _selectors),
    "protect": Key("protect", _strings),
    "protect-last-turns": Key("protect_last_turns", _integer(0), 0),
    "max-record-size": Key("max_record_size", _integer(1), DEFAULT_MAX_RECORD_SIZE),
    "quiescence": Key("quiescence", _seconds, DEFAULT_QUIESCENCE),
    "cwd": Key("cwd", _text),
    "format": Key("session_format", format_name, Format.AUTO.value),
    "jobs": Key("jobs", _integer(1)),
}
"""Every key a configuration file may hold (kebab-case, as ruff's)."""


class Config(Struct, frozen=True):
    """The settings of one configuration file, by option name; empty without a file."""

    path: Path | None = None
    values: Mapping[str, object] = field(default_factory=dict)


def load(start: Path, *, explicit: Path | None = None, isolated: bool = False) -> Config:
    """The configuration that applies: the file named by `--config`, else the one found
    from `start` upwards; none under `--isolated`."""
    if isolated:
        if explicit is not None:
            raise UsageError("--config and --isolated cannot be combined")
        return Config()
    if explicit is not None:
        table: dict[str, object] | None = _read(explicit, explicit)
        if explicit.name == PYPROJECT and table is not None:
            table = _tool_table(table, explicit)
        return _parse(table or {}, explicit)
    found = find(start)
    return _parse(found[1], found[0]) if found is not None else Config()


def find(start: Path) -> tuple[Path, dict[str, object]] | None:
    """The first configuration file from `start` upwards, with its sessionfix table."""
    directory = start.absolute()
    for folder in (directory, *directory.parents):
        for name in CANDIDATES:
            path = folder / name
            if not path.is_file():
                continue
            shown = _shown(path, start)
            table = _read(path, shown)
            if name != PYPROJECT:
                return shown, table
            tool = _tool_table(table, shown)
            if tool is not None:
                return shown, tool
    return None


def _shown(path: Path, start: Path) -> Path:
    """`path` as the user would name it from `start` (relative when that is shorter)."""
    try:
        relative = Path(os.path.relpath(path, start.absolute()))
    except ValueError:
        return path
    return relative if len(str(relative)) < len(str(path)) else path


def _read(path: Path, shown: Path) -> dict[str, object]:
    import tomllib

    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read ({described(exc)})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: invalid TOML ({exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{shown}: invalid TOML (not UTF-8 text)") from None
    except RecursionError:
        raise ConfigError(f"{shown}: invalid TOML (arrays or tables nested too deeply)") from None


def _tool_table(table: Mapping[str, object], shown: Path) -> dict[str, object] | None:
    """pyproject.toml's `[tool.sessionfix]`, None when it has none."""
    tool = table.get("tool")
    if not isinstance(tool, dict) or "sessionfix" not in tool:
        return None
    settings = tool["sessionfix"]
    if not isinstance(settings, dict):
        raise ConfigError(f"{shown}: [tool.sessionfix] must be a table")
    return settings


def _parse(table: Mapping[str, object], path: Path) -> Config:
    where = f"{path}: [tool.sessionfix]" if path.name == PYPROJECT else f"{path}:"
    values: dict[str, object] = {}
    for name, value in table.items():
        key = KEYS.get(name)
        if key is None:
            raise ConfigError(f"{where} unknown key {name!r}")
        try:
            values[key.option] = key.check(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where} '{name}' {exc}") from None
    return Config(path, values)


def resolve(given: Mapping[str, object], config: Config) -> dict[str, object]:
    """The options of a command: each one given on the command line (or in the
    environment) wins, else the file's value, else the default. A list given on the
    command line replaces the file's; `--extend-select` adds to the file's, unless
    `--select` is given, which starts the selection afresh (as in ruff)."""
    resolved = dict(given)
    for key in KEYS.values():
        if key.option in given and given[key.option] is None:
            resolved[key.option] = config.values.get(key.option, key.default)
    if given.get("select") is not None:
        resolved["extend_select"] = given.get("extend_select")
    elif given.get("extend_select") is not None:
        on_file = config.values.get("extend_select", ())
        assert isinstance(on_file, tuple)
        resolved["extend_select"] = [*on_file, *_listed(given["extend_select"])]
    return resolved


def _listed(value: object) -> list[str]:
    assert isinstance(value, list | tuple)
    return [str(item) for item in value]

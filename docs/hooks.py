"""MkDocs hooks: the pages generated from the code at build time.

The CLI reference comes from the typer app, the settings reference from the keys a
configuration file may hold (described by the options they stand for), and one page per
rule from the rule documentation the package ships, the text `sessionfix rule CODE`
prints. Nothing here is committed as a page: a command, a setting or a rule added to the
code appears on the site without an edit under docs/.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

RULES_DIR = "rules"
CLI_PAGE = "reference/cli.md"
SETTINGS_PAGE = "reference/settings.md"
RULES_INDEX = f"{RULES_DIR}/index.md"
RULES_TABLE_MARKER = "<!-- rules-table -->"
"""Where rules/index.md takes the generated table of every rule."""
GENERATED_NAV = "Rules"
"""The nav section whose entries (after its index) are the rule pages."""


def rule_page_path(name: str) -> str:
    """The source path of a rule's page (served as `rules/<name>/`)."""
    return f"{RULES_DIR}/{name}.md"


def rule_pages() -> dict[str, str]:
    """Every rule's page, by source path: the text `sessionfix rule CODE` prints."""
    from sessionfix.report.render import rules_text
    from sessionfix.rules import RULES

    return {
        rule_page_path(rule.name): rules_text([rule], as_json=False, listing=False).decode()
        for rule in RULES
    }


def _plain(text: str) -> str:
    """Help text as Markdown that shows it as written: outside code spans, no `*` or `_`
    starts emphasis and no `<` starts a tag."""
    parts = text.split("`")
    for index in range(0, len(parts), 2):
        escaped = html.escape(parts[index], quote=False)
        parts[index] = re.sub(r"([*_\\])", r"\\\1", escaped)
    return "`".join(parts)


def _cell(text: str) -> str:
    """Help text for one cell of a Markdown table."""
    return _plain(" ".join(text.split())).replace("|", "\\|")


def rules_table() -> str:
    """The table of every rule, each linked to its page."""
    from sessionfix.rules import RULES

    rows = [
        "| Code | Name | Severity | Fix | What it finds |",
        "|---|---|---|---|---|",
    ]
    rows += [
        f"| {rule.code} | [`{rule.name}`]({rule.name}.md) | {rule.severity.label} "
        f"| {_cell(rule.fix)} | {_cell(rule.summary)} |"
        for rule in RULES
    ]
    return "\n".join(rows)


def _commands() -> Iterator[tuple[str, Any]]:
    """The program and each of its commands (typer's click objects, which typer vendors),
    by the path a user types, in the order they are registered."""
    import typer.main

    from sessionfix.cli import app

    group = typer.main.get_command(app)
    yield "sessionfix", group
    for name, command in getattr(group, "commands", {}).items():
        if not command.hidden:
            yield f"sessionfix {name}", command


def _is_option(param: Any) -> bool:
    return bool(param.param_type_name == "option")


def _kind(param: Any) -> str:
    if _is_option(param) and param.is_flag:
        return "flag"
    choices = getattr(param.type, "choices", None)
    if choices:
        return " \\| ".join(f"`{getattr(choice, 'value', choice)}`" for choice in choices)
    return f"`{param.type.name.upper()}`"


def _default(param: Any) -> str:
    default = param.default
    if default is None or default == () or (_is_option(param) and param.is_flag):
        return ""
    value = getattr(default, "value", default)
    return f"`{value}`"


def _option_row(param: Any) -> str:
    names = ", ".join(f"`{name}`" for name in (*param.opts, *param.secondary_opts))
    help_text = getattr(param, "help", None) or ""
    env = param.envvar if isinstance(param.envvar, str) else None
    if env:
        help_text = f"{help_text} (env `{env}`)".strip()
    return f"| {names} | {_kind(param)} | {_default(param)} | {_cell(help_text)} |"


def cli_page() -> str:
    """The CLI reference: every command's usage, help and options, from the typer app."""
    lines = [
        "# Command line",
        "",
        "Generated from the command-line program itself: what `sessionfix COMMAND --help`",
        "prints, command by command.",
    ]
    for path, command in _commands():
        context = command.context_class(command, info_name=path)
        arguments = " ".join(command.collect_usage_pieces(context))
        lines += ["", f"## `{path}`", "", f"```\n{path} {arguments}\n```", ""]
        if command.help:
            lines += [_plain(command.help), ""]
        options = [p for p in command.params if _is_option(p) and not p.hidden]
        arguments_help = [p for p in command.params if p.param_type_name == "argument"]
        if arguments_help:
            lines += ["| argument | value | default | meaning |", "|---|---|---|---|"]
            lines += [
                f"| `{p.human_readable_name}` | {_kind(p)} | {_default(p)} "
                f"| {_cell(getattr(p, 'help', None) or '')} |"
                for p in arguments_help
            ]
            lines.append("")
        if options:
            lines += ["| option | value | default | meaning |", "|---|---|---|---|"]
            lines += [_option_row(p) for p in options]
    return "\n".join(lines) + "\n"


def _option_for(name: str) -> Any:
    """The command-line option named `name` (a parameter name), on the first command
    that has it."""
    for _, command in _commands():
        for param in command.params:
            if _is_option(param) and param.name == name:
                return param
    return None


def settings_page() -> str:
    """The settings reference: every key a configuration file may hold, with the option
    it stands for, its default and the option's help."""
    from sessionfix.config import KEYS

    lines = [
        "# Settings",
        "",
        "Generated from the keys a configuration file may hold (see",
        "[Configuration](../configuration.md)): each is the option of the same name without",
        "its dashes, checked the same way; the command line wins over the file.",
        "",
        "| key | option | value | default | meaning |",
        "|---|---|---|---|---|",
    ]
    for key, spec in KEYS.items():
        option = _option_for(spec.option)
        if option is None:
            raise RuntimeError(f"configuration key {key!r} stands for no command-line option")
        default = "" if spec.default in (None, False) else f"`{spec.default}`"
        flag = max(option.opts, key=len)
        lines.append(
            f"| `{key}` | `{flag}` | {_kind(option)} | {default} | {_cell(option.help or '')} |"
        )
    return "\n".join(lines) + "\n"


def generated_pages() -> dict[str, str]:
    """Every generated page, by its source path under docs/."""
    return {CLI_PAGE: cli_page(), SETTINGS_PAGE: settings_page(), **rule_pages()}


def _rule_nav() -> list[dict[str, str]]:
    from sessionfix.rules import RULES

    return [{f"{rule.code} {rule.name}": rule_page_path(rule.name)} for rule in RULES]


def on_config(config: Any) -> Any:
    """Lists every rule page in the nav, after the rules' index."""
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and GENERATED_NAV in entry:
            entry[GENERATED_NAV] = [*entry[GENERATED_NAV], *_rule_nav()]
    return config


def on_files(files: Any, config: Any) -> Any:
    """Adds the generated pages to the site's files."""
    from mkdocs.structure.files import File

    for path, content in generated_pages().items():
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fills the rules' index with the table of every rule."""
    if page.file.src_uri == RULES_INDEX:
        return markdown.replace(RULES_TABLE_MARKER, rules_table())
    return markdown

"""A reimplementation of CodeWhale 0.9.10's load path, written from the spec alone
(`../shared/spec/formats/codewhale.md` §3, behaviours observed on CodeWhale built from
commit 75dca2c): CodeWhale is on no registry and its source is not built here, so the
tests hold sessionfix's repairs to this. It shares no code with `sessionfix`.

`load_session` is `recover_session_for_resume`: strict parse, schema check,
`ensure_journal` (root-to-leaf walk replacing `messages` when non-empty), then
`repair_tool_call_pairs`; `load_snapshot` stops before the repair.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = {"message", "user", "assistant", "compaction", "branch_summary", "system"}
BLOCKS = {
    "text",
    "image_url",
    "thinking",
    "tool_use",
    "tool_result",
    "server_tool_use",
    "tool_search_tool_result",
    "code_execution_tool_result",
}
CALLERS = {"assistant", "assistant_interrupted"}
CRASHED = "Tool call interrupted by process exit; terminal status: crashed_and_repaired."
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
MAX_SESSIONS = 50


class LoadError(Exception):
    """CodeWhale fails to load the session (its error, in words)."""


@dataclass
class Loaded:
    messages: list[Any]
    message_count: int
    changed: bool = False
    """Whether the resume repair of tool-call pairs changed anything."""
    repaired: list[Any] = field(default_factory=list)
    """The messages after that repair (its receipt included)."""


def _reject_constant(name: str) -> Any:
    raise LoadError(f"serde: invalid value {name}")


def _finite(lexeme: str) -> float:
    value = float(lexeme)
    if math.isinf(value):
        raise LoadError("number out of range")
    return value


def parse(data: bytes) -> dict[str, Any]:
    """`fs::read_to_string` then `serde_json::from_str` (strict)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoadError("stream did not contain valid UTF-8") from exc
    if text.startswith("\ufeff"):
        raise LoadError("expected value at line 1 column 1")
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise LoadError(f"serde: {exc.msg}") from exc
    except RecursionError as exc:
        raise LoadError("recursion limit exceeded") from exc
    if not isinstance(value, dict):
        raise LoadError("invalid type: expected struct SavedSession")
    deepest = 0
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise LoadError("lone leading surrogate in hex escape") from None
        elif isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = [*item, *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    if deepest >= 128:
        raise LoadError("recursion limit exceeded")  # serde_json's default limit
    return value


STRINGS = {
    "text": ["text"],
    "thinking": ["thinking"],
    "tool_use": ["id", "name"],
    "tool_result": ["tool_use_id", "content"],
    "server_tool_use": ["id", "name"],
    "tool_search_tool_result": ["tool_use_id"],
    "code_execution_tool_result": ["tool_use_id"],
    "user": ["text"],
    "assistant": ["text"],
    "compaction": ["summary"],
    "branch_summary": ["branch_id", "summary"],
    "system": ["content"],
}
"""Per block type and entry kind: the fields serde reads as `String` (spec §2)."""


def _check_strings(value: dict[str, Any], kind: str) -> None:
    for name in STRINGS.get(kind, []):
        if not isinstance(value.get(name), str):
            raise LoadError(f"invalid type for `{name}` of `{kind}`: expected a string")


def _check_message(message: Any) -> None:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise LoadError("invalid type: expected struct Message")
    if not isinstance(message.get("content"), list):
        raise LoadError("missing field `content`")
    for block in message["content"]:
        if not isinstance(block, dict) or block.get("type") not in BLOCKS:
            kind = block.get("type") if isinstance(block, dict) else block
            raise LoadError(f"unknown variant {kind!r}")
        _check_strings(block, block["type"])
        if block["type"] == "image_url" and not isinstance(
            (block.get("image_url") or {}).get("url"), str
        ):
            raise LoadError("missing field `url`")


def deserialise(value: dict[str, Any]) -> dict[str, Any]:
    """What serde's types for `SavedSession` refuse (§2), then the schema check."""
    version = value.get("schema_version", 1)
    if not isinstance(value.get("metadata"), dict):
        raise LoadError("missing field `metadata`")
    if "messages" not in value or not isinstance(value["messages"], list):
        raise LoadError("missing field `messages`")
    for message in value["messages"]:
        _check_message(message)
    journal = value.get("journal")
    if journal is not None:
        for entry in journal.get("entries", []):
            if entry.get("kind") not in KINDS:
                raise LoadError(f"unknown variant `{entry.get('kind')}`")
            if not isinstance(entry.get("created_at"), str) or not RFC3339.match(
                entry["created_at"]
            ):
                raise LoadError("input contains invalid characters (created_at)")
            if entry["kind"] == "message":
                _check_message(entry.get("message"))
            else:
                _check_strings(entry, entry["kind"])
    if version > 1:
        raise LoadError(f"Session schema v{version} is newer than supported v1")
    return value


def project(entry: dict[str, Any]) -> dict[str, Any]:
    kind = entry["kind"]
    if kind == "message":
        return entry["message"]
    if kind in ("user", "assistant"):
        return {"role": kind, "content": [{"type": "text", "text": entry["text"]}]}
    if kind == "compaction":
        text = "[compaction summary] " + entry["summary"]
    elif kind == "branch_summary":
        text = "[branch summary] " + entry["summary"]
    else:
        text = entry["content"]
    return {"role": "system", "content": [{"type": "text", "text": text}]}


def root_to_leaf(journal: dict[str, Any]) -> list[dict[str, Any]]:
    """The walk from `journal.leaf_id` up the parent links, through an id map in which a
    later duplicate replaces an earlier one; it stops at an unknown or repeated id."""
    entries = {entry["id"]: entry for entry in journal.get("entries", [])}
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    current = journal.get("leaf_id")
    while isinstance(current, str) and current in entries and current not in seen:
        seen.add(current)
        entry = entries[current]
        path.append(entry)
        current = entry.get("parent_id")
    path.reverse()
    return path


def ensure_journal(value: dict[str, Any]) -> list[Any]:
    journal = value.get("journal")
    if journal is None:
        return value["messages"]
    path = root_to_leaf(journal)
    if path:
        return [project(entry) for entry in path]
    return value["messages"]


def repair_tool_call_pairs(messages: list[Any]) -> tuple[list[Any], bool]:
    """`tool_history_repair::repair_tool_call_pairs` (§3 step 6)."""
    out: list[Any] = []
    crashed = duplicates = orphans = 0
    group_calls: list[str] = []
    answered: set[str] = set()
    call_message_at = -1

    def close() -> None:
        nonlocal crashed
        missing = [call for call in group_calls if call not in answered]
        if missing:
            results = [
                {"type": "tool_result", "tool_use_id": c, "content": CRASHED, "is_error": True}
                for c in missing
            ]
            out.insert(call_message_at + 1, {"role": "user", "content": results})
            crashed += len(missing)

    for message in messages:
        blocks = message["content"]
        if message["role"] in CALLERS:
            close()
            group_calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
            answered = set()
            kept = [b for b in blocks if b["type"] != "tool_result"]
            orphans += len(blocks) - len(kept)
            call_message_at = len(out)
        else:
            kept = []
            for block in blocks:
                if block["type"] != "tool_result":
                    kept.append(block)
                elif block["tool_use_id"] in group_calls and block["tool_use_id"] not in answered:
                    answered.add(block["tool_use_id"])
                    kept.append(block)
                elif block["tool_use_id"] in group_calls:
                    duplicates += 1
                else:
                    orphans += 1
        if kept:
            out.append({**message, "content": kept} if len(kept) != len(blocks) else message)
        elif not blocks:
            out.append(message)
    close()
    changed = bool(crashed or duplicates or orphans)
    if changed:
        receipt = (
            f"[tool_history_repair] Repaired {crashed} crashed tool call(s); quarantined "
            f"{duplicates} duplicate and {orphans} orphan terminal result(s)."
        )
        out.append({"role": "assistant", "content": [{"type": "text", "text": receipt}]})
    return out, changed


def load_snapshot(path: Path) -> Loaded:
    """`load_session_snapshot`: what the document holds, without the tool repair."""
    value = deserialise(parse(path.read_bytes()))
    messages = ensure_journal(value)
    return Loaded(messages, len(messages))


def load_session(path: Path) -> Loaded:
    """`recover_session_for_resume`."""
    loaded = load_snapshot(path)
    loaded.repaired, loaded.changed = repair_tool_call_pairs(loaded.messages)
    return loaded


def surviving_sessions(folder: Path) -> list[str]:
    """`cleanup_old_sessions`: the ids of the 50 most recently updated sessions."""
    found = []
    for path in folder.glob("*.json"):
        try:
            value = parse(path.read_bytes())
        except LoadError:
            continue
        metadata = value.get("metadata")
        if isinstance(metadata, dict):
            found.append((str(metadata.get("updated_at")), path.stem))
    found.sort(reverse=True)
    return [stem for _, stem in found[:MAX_SESSIONS]]

"""The chat messages open-webui 0.12.4 sends for the messages it keeps of a branch
(spec formats/open-webui.md §3.4): a message without `output` as it is, less the fields
it strips; an assistant's `output` (native tool calling) as assistant messages holding
its text and the calls that have a result, a `tool` message per result and a user
message with the images a result returned; then calls and results without their other
half are dropped (`sanitize_tool_pairs`). Reasoning is not sent (no reasoning format
without a model that asks for one); voice transcripts and file tags are not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from sessionfix.formats.openwebui.database import open_webui_json
from sessionfix.formats.openwebui.history import Message

STRIPPED: Final = ("id", "output", "model", "contextSummary", "context_summary", "usage", "meta")
FINISHED: Final = frozenset({"completed", "failed", "rejected"})
IMAGES_NOTE: Final = "Here are the images from the tool results above. Please analyze them."

Sent = tuple[str, dict[str, Any]]
"""A chat message sent, and the id of the stored message it comes from."""


def _function(item: dict[str, Any]) -> dict[str, Any]:
    function = item.get("provider_function")
    if not isinstance(function, dict):
        function = item
    arguments = function.get("arguments", "{}")
    return {
        "name": function.get("name", ""),
        "arguments": arguments if isinstance(arguments, str) else open_webui_json(arguments),
    }


def _output_text(parts: Any) -> str:
    text = ""
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict) and part.get("type") == "output_text":
            text += part.get("text", "")
    return text


class _Output:
    """An assistant's output items turned into chat messages, as open-webui does."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        finished = {
            item.get("call_id")
            for item in items
            if item.get("type") == "function_call"
            and item.get("call_id")
            and item.get("status") in FINISHED
        }
        answered = {
            item.get("call_id")
            for item in items
            if item.get("type") == "function_call_output" and item.get("call_id")
        }
        self.paired = finished & answered
        self.sent: list[dict[str, Any]] = []
        self.content: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []
        self.images: list[str] = []
        for item in items:
            self._take(item)
        self._flush_results()
        self._flush_images()
        self._flush()

    def _take(self, item: dict[str, Any]) -> None:
        kind = item.get("type", "")
        if kind != "function_call_output":
            self._flush_results()
            self._flush_images()
        if kind == "message":
            text = _output_text(item.get("content", []))
            if text:
                self.content.append(text)
        elif kind == "function_call" and item.get("call_id") in self.paired:
            self.calls.append(
                {"id": item.get("call_id", ""), "type": "function", "function": _function(item)}
            )
        elif kind == "function_call_output" and item.get("call_id") in self.paired:
            self.results.append(item)
        elif kind == "open_webui:code_interpreter":
            self._code(item)

    def _code(self, item: dict[str, Any]) -> None:
        code, output = item.get("code", ""), item.get("output", "")
        if code:
            self.content.append(f"<code_interpreter>\n{code}\n</code_interpreter>")
        if output:
            text = (
                output.get("stdout", "") or output.get("result", "")
                if isinstance(output, dict)
                else str(output)
            )
            if text:
                self.content.append(
                    f"<code_interpreter_output>\n{text}\n</code_interpreter_output>"
                )

    def _flush(self) -> None:
        if not self.content and not self.calls:
            return
        message: dict[str, Any] = {"role": "assistant", "content": "\n".join(self.content)}
        if self.calls:
            message["tool_calls"] = self.calls
        self.sent.append(message)
        self.content, self.calls = [], []

    def _flush_results(self) -> None:
        if not self.results:
            return
        self._flush()
        for item in self.results:
            text = ""
            parts = item.get("output", [])
            for part in parts if isinstance(parts, list) else []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "input_text":
                    found = part.get("text", "")
                    text += found if isinstance(found, str) else str(found)
                elif part.get("type") == "input_image" and part.get("image_url", ""):
                    self.images.append(part["image_url"])
            self.sent.append(
                {"role": "tool", "tool_call_id": item.get("call_id", ""), "content": text}
            )
        self.results = []

    def _flush_images(self) -> None:
        if not self.images:
            return
        images = [{"type": "image_url", "image_url": {"url": url}} for url in self.images]
        self.sent.append(
            {"role": "user", "content": [{"type": "text", "text": IMAGES_NOTE}, *images]}
        )
        self.images = []


def _paired(messages: list[Sent]) -> list[set[str]]:
    """Per message, the call ids answered within its assistant-and-results block."""
    found: list[set[str]] = [set() for _ in messages]
    for index, (_, message) in enumerate(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        end = index + 1
        while end < len(messages) and messages[end][1].get("role") == "tool":
            end += 1
        asked = {call.get("id") for call in message["tool_calls"] if call.get("id")}
        answered = {result.get("tool_call_id") for _, result in messages[index + 1 : end]}
        for block in range(index, end):
            found[block] = asked & answered
    return found


def _reconciled(messages: list[Sent], *, stripped: bool) -> list[Sent]:
    """Calls without an adjacent result, and results without their call, left out; an
    assistant message left without calls stays if it has content (`stripped`: content
    that is more than whitespace, as the output's own reconciling asks)."""
    kept: list[Sent] = []
    for (key, message), paired in zip(messages, _paired(messages), strict=True):
        if message.get("role") == "tool" and message.get("tool_call_id") not in paired:
            continue
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            kept.append((key, message))
            continue
        calls = [call for call in message["tool_calls"] if call.get("id") in paired]
        if calls:
            kept.append((key, {**message, "tool_calls": calls}))
            continue
        clean = {
            name: value
            for name, value in message.items()
            if name not in ("tool_calls", "reasoning_items")
        }
        content = clean.get("content")
        if content.strip() if stripped and isinstance(content, str) else content:
            kept.append((key, clean))
    return kept


def payload(messages: Iterable[Message]) -> list[Sent]:
    """The chat messages open-webui sends for the kept messages of a branch."""
    sent: list[Sent] = []
    for message in messages:
        key = str(message.get("id"))
        output = message.get("output")
        if message.get("role") == "assistant" and output:
            items = (
                [item for item in output if isinstance(item, dict)]
                if isinstance(output, list)
                else []
            )
            converted = [(key, found) for found in _Output(items).sent]
            expanded = _reconciled(converted, stripped=True)
            if expanded:
                sent.extend(expanded)
                continue
            if not message.get("content"):
                continue
        clean = {name: value for name, value in message.items() if name not in STRIPPED}
        clean.pop("files", None)
        sent.append((key, clean))
    return _reconciled(sent, stripped=False)

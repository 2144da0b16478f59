"""SF604 oversized-inline-media: an image or document inline that the provider refuses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats import ContentBlocks
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import InlineMedia, MediaKind, MediaLimits, SessionView
from sessionfix.rules.analysis import describe
from sessionfix.rules.base import Rule, RuleContext, unsafe
from sessionfix.units import human_bytes

PLACEHOLDER = (
    "[sessionfix: {what} removed - over the limits of {by}; the original session file, "
    "or the backup repair --in-place kept of it, holds it (sessionfix restore --list)]"
)
"""What a removed block is replaced by: what it was, and where it still is."""


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    limits = view.media_limits
    if not view.media or limits is None:
        return
    sent = _sent(view)
    images = sum(media.kind is MediaKind.IMAGE for index in sent for media in view.media[index])
    too_many = limits.many is not None and images > limits.many
    over_request = _over_request(view, sent, limits)
    for index, held in sorted(view.media.items()):
        in_context = index in sent
        flagged: list[tuple[InlineMedia, list[str]]] = []
        errors = False
        for number, media in enumerate(held):
            reasons = _refused(media, limits)
            if in_context and too_many and _wider(media, limits.many_pixels):
                reasons.append(
                    f"over the {limits.many_pixels} px a side an image may have in a request "
                    f"of more than {limits.many} images (the context holds {images})"
                )
            total = over_request.get((index, number))
            if total is not None:
                reasons.append(
                    f"the inline media in context come to {human_bytes(total)}, over the "
                    f"{human_bytes(limits.request or 0)} a request may have"
                )
            if reasons:
                errors = errors or in_context
            elif in_context and _wider(media, limits.many_pixels) and limits.many is not None:
                reasons.append(
                    f"over {limits.many_pixels} px a side: {limits.by} refuses it once the "
                    f"context holds more than {limits.many} images (it holds {images})"
                )
            if reasons:
                flagged.append((media, reasons))
        if not flagged:
            continue
        yield _diagnostic(ctx, index, flagged, limits, errors, in_context)


def _diagnostic(
    ctx: RuleContext,
    index: int,
    flagged: list[tuple[InlineMedia, list[str]]],
    limits: MediaLimits,
    errors: bool,
    in_context: bool,
) -> Diagnostic:
    parts = [f"an {_what(media)}: {'; '.join(reasons)}" for media, reasons in flagged]
    if errors:
        tail = f"; {limits.by} refuses every request that holds it, /compact's too"
        severity = Severity.ERROR
    elif in_context:
        tail = ""
        severity = Severity.INFO
    else:
        tail = "; it is not sent now (not in the context the agent resumes), only kept in the file"
        severity = Severity.INFO
    media = tuple(media for media, _ in flagged)
    texts = tuple(PLACEHOLDER.format(what=_what(block), by=limits.by) for block in media)
    editor = cast(ContentBlocks, ctx.editor)
    removed = sum(block.encoded * (1 + block.copies) for block in media)
    one = len(media) == 1
    fix = unsafe(
        f"replace {'it' if one else 'them'} by a text placeholder naming what "
        f"{'it was' if one else 'they were'} ({human_bytes(removed)} of base64 leave the "
        "session; its backup keeps them)",
        ctx.rewrite_record(index, editor.replace_media(media, texts)),
    )
    return ctx.entry_diagnostic(
        RULE,
        index,
        f"{describe(ctx, index)} holds {'; '.join(parts)}{tail}",
        severity=severity,
        fix=fix,
    )


def _sent(view: SessionView) -> set[int]:
    """The records with media in the context the agent resumes."""
    return {index for index in view.media if view.on_path(index) and view.in_context(index)}


def _refused(media: InlineMedia, limits: MediaLimits) -> list[str]:
    """What of one block the provider refuses in any request."""
    reasons = []
    if media.kind is MediaKind.IMAGE:
        if limits.encoded is not None and media.encoded > limits.encoded:
            reasons.append(
                f"{human_bytes(media.encoded)} of base64, over the "
                f"{human_bytes(limits.encoded)} an image may have"
            )
        if _wider(media, limits.pixels):
            reasons.append(f"over the {limits.pixels} px a side an image may have")
    elif limits.request is not None and media.encoded > limits.request:
        reasons.append(
            f"{human_bytes(media.encoded)} of base64, over the "
            f"{human_bytes(limits.request)} a request may have"
        )
    return reasons


def _wider(media: InlineMedia, pixels: int | None) -> bool:
    return (
        pixels is not None
        and media.width is not None
        and media.height is not None
        and max(media.width, media.height) > pixels
    )


def _over_request(
    view: SessionView, sent: set[int], limits: MediaLimits
) -> dict[tuple[int, int], int]:
    """When the media in context come to more than a request may have: the largest of
    them, as many as the rest must lose to fit, each with the total."""
    if limits.request is None:
        return {}
    blocks = [
        (media.encoded, index, number)
        for index in sent
        for number, media in enumerate(view.media[index])
    ]
    total = sum(size for size, _, _ in blocks)
    if total <= limits.request:
        return {}
    found: dict[tuple[int, int], int] = {}
    rest = total
    for size, index, number in sorted(blocks, reverse=True):
        if rest <= limits.request:
            break
        found[index, number] = total
        rest -= size
    return found


def _what(media: InlineMedia) -> str:
    """`image/png image (3024x4032 px, 6.1 MiB)`."""
    kind = media.media_type or "inline"
    size = human_bytes(media.decoded)
    if media.width is not None and media.height is not None:
        return f"{kind} {media.kind.value} ({media.width}x{media.height} px, {size})"
    return f"{kind} {media.kind.value} ({size})"


RULE = Rule(
    code="SF604",
    name="oversized-inline-media",
    severity=Severity.ERROR,
    fix="unsafe",
    requires=frozenset({Capability.INLINE_MEDIA}),
    summary="An image or document held inline over what the provider accepts",
    check=check,
)

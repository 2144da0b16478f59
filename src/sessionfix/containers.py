"""Containers: how an agent holds its sessions, and how it addresses their records.

A container yields sessions. While one is checked or repaired it is held as lines of
text, which every rule reads as it reads any session (a session file's own lines, the
text of a compressed one, the transcript of a store's session, one line per row: the
store's temporary copy stays behind this seam for now), together with the container's
names for its records (`RecordNames`: a file's lines, a store's row keys), so that its
findings are located and worded by the container. A repaired session goes back through
its container's write protocol: a store's in the store's own transaction (`take_back`),
a file's by the safe-replace recipe, compressed again when the file is (`take_back`),
and a copy into a new session file by its `publish`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, cast

from msgspec import Struct

from sessionfix import registry, stores
from sessionfix.diagnostics import Diagnostic
from sessionfix.errors import InputError, described
from sessionfix.formats import Format
from sessionfix.location import FILE_NAMES, RecordNames
from sessionfix.model.loaded import Loader
from sessionfix.read.compressed import (
    compress_file,
    compressed_chunks,
    is_compressed,
    plain_name,
    scaled_progress,
    session_name,
    session_text,
)
from sessionfix.registry import ContainerDeclaration, JsonlFiles, StoreDeclaration

if TYPE_CHECKING:
    from sessionfix.safety.writing import Snapshot

ProgressCallback = Callable[[int], None]


class HeldSession(Struct):
    """One session of a container, held as lines of text while it is in use."""

    text: Path
    """The session's lines, as every rule reads them."""
    container: Path
    shown: str
    """The container as findings name it."""
    names: RecordNames
    """How the container names the session's records."""
    format: Format | None = None
    """What the text is read as; None: what the run's settings say."""
    named_as: Path | None = None
    """The name that tells the session's format and id, when it is not `text`'s."""
    hold_open: bool = False
    """The text goes away before the findings' content is read: keep it open."""
    transcript: stores.Transcript | None = None
    """For a store's session: its transcript, which a rewrite replaces."""

    @property
    def session(self) -> str:
        return self.names.session

    @property
    def title(self) -> str:
        """The session as a listing of several names it: the container, and in a store
        the session too (`store:session`)."""
        return f"{self.shown}:{self.session}" if self.session else self.shown

    def progress(self, progress: ProgressCallback | None) -> ProgressCallback | None:
        """`progress` in bytes of the container, for bytes read of the text."""
        if self.transcript is not None:
            return progress
        return scaled_progress(progress, self.container, self.text)

    def located(self, found: Iterable[Diagnostic]) -> list[Diagnostic]:
        """Findings in the text, located and worded by the container."""
        if not self.session:
            return list(found)
        return [d.located(self.shown, self.names) for d in found]


FILE_SESSION: Final = stores.StoredSession("")
"""The one session a session file holds."""


class Container(Protocol):
    """Where sessions are kept: a session file (plain or `.zst`), a store of sessions."""

    path: Path

    def sessions(
        self, only: Sequence[str] | None, *, strict: bool = False
    ) -> list[stores.StoredSession]:
        """The sessions a run reads (`only`: those named, in a container holding several;
        one it does not hold is an error when `strict`, else the run's to report)."""
        ...

    def hold(self, session: stores.StoredSession) -> AbstractContextManager[HeldSession]:
        """The session as lines of text, for as long as the block lasts."""
        ...

    def loader(self, held: HeldSession) -> Loader | None:
        """What the session's agent sends the model from it, where the container's
        agent loads it otherwise than its format's package says (None: as that says)."""
        ...

    def close(self) -> None: ...


class SessionFile:
    """A JSONL session file, plain or zstd-compressed: one session, its records named by
    their lines."""

    def __init__(self, path: Path, shown: str) -> None:
        self.path = path
        self.shown = shown

    def sessions(
        self, only: Sequence[str] | None, *, strict: bool = False
    ) -> list[stores.StoredSession]:
        return [FILE_SESSION]

    @contextmanager
    def hold(self, session: stores.StoredSession) -> Iterator[HeldSession]:
        with session_text(self.path) as text:
            yield HeldSession(
                text,
                self.path,
                self.shown,
                FILE_NAMES,
                named_as=session_name(self.path),
                hold_open=is_compressed(self.path),
            )

    def loader(self, held: HeldSession) -> Loader | None:
        return None

    def take_back(
        self,
        original: Snapshot,
        text: Iterable[bytes],
        *,
        verify: Callable[[Path], None],
        original_digest: str,
        allow_writers: bool,
    ) -> Path | None:
        """Replace the session file, as `original` saw it, by the repaired `text` (the
        safe-replace recipe, cli-and-safety.md §8): written beside it, compressed when
        the file is; `verify` reads it as text (a `.zst` file decompressed again, and
        compressed anew should `verify` repair the text further); renamed over the file,
        which stays as a hard-linked backup, returned."""
        from sessionfix.safety.writing import replace_file

        if not is_compressed(self.path):
            return replace_file(
                original,
                text,
                verify=verify,
                original_digest=original_digest,
                allow_writers=allow_writers,
            )
        name = plain_name(self.path.name) or "session.jsonl"

        def verify_compressed(temp: Path) -> None:
            with session_text(temp, compressed=True, name=name) as written:
                before = os.stat(written)
                verify(written)
                if _replaced(written, before):
                    _compress_over(written, temp)

        return replace_file(
            original,
            compressed_chunks(text),
            verify=verify_compressed,
            original_digest=original_digest,
            allow_writers=allow_writers,
        )

    def publish(self, verified: Path, mode: int, *, replace: bool) -> None:
        """Give the verified repaired text at `verified` (beside the file) this file's
        name, compressed when the name ends in `.zst`: renamed over the file a link
        leads to when replacing is allowed, else linked, which fails rather than
        overwrite a file that appeared meanwhile."""
        from sessionfix.safety.writing import WriteFailed

        target = Path(os.path.realpath(self.path))
        if not is_compressed(self.path):
            _publish(verified, target, self.shown, replace=replace)
            return
        packed = verified.with_name(verified.name + ".zst")
        try:
            try:
                compress_file(verified, packed, mode)
            except OSError as exc:
                raise WriteFailed(
                    f"{self.shown}: cannot write the repaired file ({described(exc)})"
                ) from None
            verified.unlink()
            _publish(packed, target, self.shown, replace=replace)
        except BaseException:
            with suppress(OSError):
                packed.unlink()
            raise

    def close(self) -> None:
        pass


def _replaced(path: Path, before: os.stat_result) -> bool:
    """Whether `path` is no longer the file `before` was taken of."""
    after = os.stat(path)
    return (after.st_ino, after.st_size, after.st_mtime_ns) != (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )


def _compress_over(text: Path, packed: Path) -> None:
    """Replace the compressed file `packed` by `text` compressed (same mode and owner)."""
    from sessionfix.replacing import chown_best_effort
    from sessionfix.safety.writing import WriteFailed

    st = os.stat(packed)
    again = packed.with_name(packed.name + ".next")
    try:
        compress_file(text, again, st.st_mode, sync=True)
        chown_best_effort(again, st.st_uid, st.st_gid)
        os.replace(again, packed)
    except OSError as exc:
        with suppress(OSError):
            again.unlink()
        raise WriteFailed(f"{packed}: cannot write the repaired file ({described(exc)})") from None


def _publish(temp: Path, target: Path, shown: str, *, replace: bool) -> None:
    """Rename `temp` over `target` when `replace`, else link it there (on a file system
    without hard links: claim the name, then rename over the claim)."""
    from sessionfix.safety.writing import WriteFailed, WriteRefused

    try:
        if replace:
            os.replace(temp, target)
            return
        try:
            os.link(temp, target)
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.replace(temp, target)
            return
    except FileExistsError:
        raise WriteRefused(f"{shown}: exists (--force to replace it)") from None
    except OSError as exc:
        raise WriteFailed(f"{shown}: cannot write ({described(exc)})") from None
    with suppress(OSError):
        temp.unlink()


_NO_HARD_LINKS: Final = frozenset(
    {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS}
)


class StoreContainer:
    """A store of sessions (OpenClaw's database): each session's rows, one line each of a
    transcript, named by the store's key of each row; a repaired session is written back
    in the store's own transaction."""

    def __init__(self, store: stores.SessionStore, shown: str) -> None:
        self.store = store
        self.path = store.path
        self.shown = shown

    def sessions(
        self, only: Sequence[str] | None, *, strict: bool = False
    ) -> list[stores.StoredSession]:
        return stores.select_sessions(self.store, only, strict=strict)

    @contextmanager
    def hold(self, session: stores.StoredSession) -> Iterator[HeldSession]:
        with stores.transcript_of(self.store, session) as transcript:
            yield HeldSession(
                transcript.path,
                self.path,
                self.shown,
                transcript.names(),
                format=Format.AUTO,
                hold_open=True,
                transcript=transcript,
            )

    def rewritten(self, held: HeldSession) -> HeldSession:
        """The session as a rewrite leaves it: the lines of the repair, named by the keys
        the store gives the rows it writes."""
        transcript = _transcript_of(held)
        names = transcript.names(self.store.key_after_rewrite)
        return HeldSession(held.text, self.path, self.shown, names, transcript=transcript)

    def take_back(
        self,
        held: HeldSession,
        repaired: Path,
        origins: stores.Origins,
        *,
        backup: bool,
        quiescence: float = 0.0,
    ) -> Path | None:
        """Replace the session's rows by the lines of `repaired`, in one transaction (a
        store its agent writes without a lock only once it has been quiet for
        `quiescence` seconds); returns the backup kept, if any."""
        if isinstance(self.store, stores.WaitsForQuiet):
            self.store.refuse_unquiet(quiescence)
        return self.store.replace(_transcript_of(held), repaired, origins, backup=backup)

    def write_copy(
        self,
        output: Path,
        held: HeldSession,
        repaired: Path | None,
        origins: stores.Origins | None,
        *,
        replace: bool,
    ) -> None:
        """A copy of the store at `output` whose session is the lines of `repaired`
        (None: as it is), for a store whose `-o` is a store."""
        self.store.write_copy(output, _transcript_of(held), repaired, origins, replace=replace)

    def rewrite_notes(self, held: HeldSession) -> list[str]:
        """What a rewrite of the session left as it was, that the store keeps elsewhere."""
        return self.store.rewrite_notes(_transcript_of(held))

    def loader(self, held: HeldSession) -> Loader:
        """The store's agent loads the session from its rows, as the store reads them."""
        return cast(Loader, self.store.loader(_transcript_of(held)))

    def close(self) -> None:
        self.store.close()


def _transcript_of(held: HeldSession) -> stores.Transcript:
    assert held.transcript is not None, "a store's session is held as its transcript"
    return held.transcript


def declared_container(path: Path) -> ContainerDeclaration:
    """How the sessions at `path` are held, as the registered packages declare: a store
    one of them recognises, else a session file (`InputError` when no package reads
    session files)."""
    found = stores.declared_store(path)
    if found is not None:
        return found[1]
    for package in registry.packages("CONTAINERS"):
        for declared in package.CONTAINERS:
            if isinstance(declared, JsonlFiles):
                return declared
    raise InputError(f"{path}: no registered package reads session files")


def is_store(path: Path) -> bool:
    """Whether `path` is a store of sessions, as a package declares one."""
    return isinstance(declared_container(path), StoreDeclaration)


def open_container(path: Path, shown: str) -> SessionFile | StoreContainer:
    """The container at `path`, as its package declares it: a store of sessions, else a
    session file (`InputError` when it is a store that cannot be opened)."""
    if isinstance(declared_container(path), StoreDeclaration):
        return StoreContainer(stores.open_store(path), shown)
    return SessionFile(path, shown)

"""Every exception uac raises. Each message is one line that says what went wrong and what to do."""

from __future__ import annotations

from collections.abc import Collection

from uac_kernel.core.display import did_you_mean, printable, shorten

__all__ = [
    "CheckpointNotFound",
    "ChecksumMismatch",
    "CodeError",
    "CommandLineError",
    "ConstraintError",
    "EditConflict",
    "EventError",
    "FleetConflict",
    "FleetDiverged",
    "FleetError",
    "FoldError",
    "MissingExtra",
    "ModelError",
    "ModelOffline",
    "ModelOutputInvalid",
    "OutputRefused",
    "QueryError",
    "ReviewError",
    "RuleError",
    "SandboxFailed",
    "SandboxLimit",
    "SandboxRefused",
    "SnapshotIgnored",
    "StoreError",
    "StoreLocked",
    "UacError",
    "UnknownField",
    "UnknownUser",
    "VocabularyError",
]


class UacError(Exception):
    """Base of every error uac raises; its message says what to do."""


class CommandLineError(UacError):
    """The ``uac`` command line is wrong: an unknown command, a bad or missing argument."""


class StoreError(UacError):
    """The DuckDB store cannot be opened or written."""


class StoreLocked(StoreError):
    """Another process holds the store file read-write."""


class UnknownUser(UacError):
    """The store holds no events of the user a read asked for, or several users and none named.

    ``users`` are the users the store does hold, so a face can list or suggest them.
    """

    def __init__(self, message: str, *, users: list[str] | None = None):
        super().__init__(message)
        self.users = users or []


class EventError(UacError):
    """An event is malformed or contradicts the log. Names the origin, line and field."""

    def __init__(self, message: str, *, origin: str = "", line: int | None = None, field: str = ""):
        # The origin is a file name or a source as given: shown with control and invisible
        # characters escaped (the field's repr escapes them too), so the message stays one line
        # and cannot drive a terminal.
        where = printable(origin) if origin else "<events>"
        if line is not None:
            where += f":{line}"
        if field:
            where += f": field {field!r}"
        super().__init__(f"{where}: {message}")
        self.origin = origin
        self.line = line
        self.field = field
        self.reason = message


class FoldError(UacError):
    """The log cannot be folded into state (only possible if it was written by other tools)."""


class CheckpointNotFound(UacError):
    """The asked-for checkpoint version does not exist."""


class CodeError(UacError):
    """Generated or edited code cannot be read back into records (it is read, never run)."""


class ModelError(UacError):
    """A model call failed, or no model is configured."""


class ModelOffline(ModelError):
    """Offline mode, and the request was never recorded."""


class ModelOutputInvalid(ModelError):
    """The model's answer does not fit the asked-for schema; ``detail`` says how."""

    def __init__(self, message: str, *, detail: str = ""):
        super().__init__(message)
        self.detail = detail


class EditConflict(UacError):
    """An edited cell overlaps changes made to the log after the version it came from."""


class QueryError(UacError):
    """A SQL query or a query over the state failed."""


class UnknownField(QueryError, AttributeError):
    """A record was asked for a field its type has never had: a misspelt name, most often.

    Also an ``AttributeError``, so ``getattr(rec, name, default)`` and ``hasattr`` still answer.
    ``known`` are the type's names (one or more collections, joined): the message suggests the
    closest. It is written only when read, so a ``getattr`` with a default that misses costs no
    search of a type's fields (2,000 fields: ~1 ms a miss).
    """

    def __init__(self, type_name: str, field: str, *known: Collection[str]):
        super().__init__(type_name, field, name=field)
        self.known = known

    def names(self) -> list[str]:
        """The type's names, each once, in order."""
        return list(dict.fromkeys(n for group in self.known for n in group))

    def __reduce__(self) -> tuple[type[UnknownField], tuple[str, str, list[str]]]:
        # ``known`` may be a live view of a type's fields, which cannot be pickled: its names are.
        return type(self), (*self.args, self.names())

    def __str__(self) -> str:
        type_name, field = self.args
        names = self.names()
        hint = did_you_mean(field, names)
        if not hint and names:
            hint = f" Its fields: {shorten(', '.join(names), 300)}."
        # The name is as an expression (or a model) wrote it: escaped, it cannot reach a
        # terminal as control characters.
        return f"{type_name} has no field {printable(repr(field))}.{hint}"


class RuleError(UacError):
    """A rule is declared wrongly (bad name, unknown severity)."""


class SandboxRefused(UacError):
    """An expression was refused before running; the message says which construct and why."""


class SandboxLimit(UacError):
    """An expression exceeded its CPU time, memory or wall-clock budget."""


class SandboxFailed(UacError):
    """An expression raised an exception while it ran.

    ``trace`` is what a tracing namespace noted before it failed (``evaluate_traced``), so what
    a failed attempt read is not lost.
    """

    def __init__(self, message: str, *, trace: object = None):
        super().__init__(message)
        self.trace = trace


class MissingExtra(UacError, ImportError):
    """A part of uac needs an optional extra that is not installed; the message is the command.

    Also an ``ImportError``, so code that probes for an optional part (``importorskip``, an
    ``except ImportError``) still works.
    """

    def __init__(self, feature: str, *, extra: str, missing: str):
        super().__init__(
            f"{feature} needs the {extra!r} extra ({missing} is not installed): "
            f"pip install 'uac-kernel[{extra}]'"
        )
        self.feature = feature
        self.extra = extra
        self.missing = missing
        self.name = missing


class ChecksumMismatch(UacError):
    """A file uac was about to load does not have the SHA-256 it must have, so it was refused."""


class ReviewError(UacError):
    """A decision on a model answer held for review cannot be made: no such held batch, no such
    operation in it, or its answer or turns are no longer there to apply."""


class ConstraintError(UacError):
    """A constraint is not valid (an unknown kind, a bad field, a value out of bounds), or no
    constraint of that key is in force; the message names where and what to change.

    ``field`` is the dotted path of the bad field within the constraint (empty when the whole
    object is wrong) and ``reason`` the message without its place, so a caller that names the
    place its own way (an event's file and line) can say it once.
    """

    def __init__(self, message: str, *, field: str = "", reason: str = ""):
        super().__init__(message)
        self.field = field
        self.reason = reason or message


class VocabularyError(UacError):
    """A vocabulary binding is not valid (a concept or role the catalogue lacks, a type or
    field the user does not have, a field whose values cannot carry the concept) or not there
    to change; the message names what is wrong and what to write instead.

    ``field`` and ``reason`` as a ``ConstraintError``'s: the place within the binding, and the
    message without it.
    """

    def __init__(self, message: str, *, field: str = "", reason: str = ""):
        super().__init__(message)
        self.field = field
        self.reason = reason or message


class FleetError(UacError):
    """A fleet directory (``uac export``) is missing, damaged, or cannot take a write; the
    message names the directory or user and what to do."""


class FleetConflict(FleetError):
    """Another writer committed the same user's partition at the same time; rerunning commits
    on top of what it wrote."""


class FleetDiverged(FleetError):
    """A user's chain in a store and in a fleet directory do not extend one another (one was
    rewritten, or they grew apart); nothing of that user was written."""


class OutputRefused(UacError):
    """A file a face was asked to write was refused or could not be written: it is a store,
    its log or inside a fleet directory (never written over), or an existing file of another
    kind (replaced only when forced). The message names the path and what to do."""


class SnapshotIgnored(UserWarning):
    """A user's snapshot of the fold does not fit the log (another format, a chain position the
    log does not have, a forget since, a damaged table): it is ignored and the log folded in
    full, which gives the same answers, only slower; the next checkpoint writes a new one."""

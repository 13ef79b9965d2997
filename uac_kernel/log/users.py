"""Which user of a store a command means, and which event kinds it may ask the log for.

Both need only the store, not the user's state: the commands that read the log or the
checkpoints (``uac log``, ``uac checkpoints``, ``uac code``) answer from here without a fold,
and without importing the workbench.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from uac_kernel.core.display import did_you_mean
from uac_kernel.core.errors import QueryError, UnknownUser
from uac_kernel.log.store import EVENT_KINDS

if TYPE_CHECKING:
    from uac_kernel.log.store import Store

__all__ = ["DEFAULT_USER", "check_kind", "resolve_user", "unknown_user_message"]

DEFAULT_USER = "me"
"""The user of a store that has none yet, when no user is named."""


def resolve_user(store: Store, user: str | None, *, create: bool) -> str:
    """The user a workbench opens: ``user`` if named, else the store's only user (``me`` in a
    store with none yet); several users and none named is an ``UnknownUser``.

    A user exists by having events. With ``create`` (ingesting is how a user is made) any name
    goes; without it, a name with no events is an ``UnknownUser`` that lists the store's users,
    since a read would find nothing and answer as if the history were empty.
    """
    if user is not None:
        try:
            user.encode("utf-8")
        except (AttributeError, UnicodeEncodeError):
            raise UnknownUser(
                f"user id {user!r} is not a text DuckDB can store (text without lone surrogates)"
            ) from None
    if user is None:
        counts = store.user_counts()
        if len(counts) == 1:
            return next(iter(counts))
        if not counts:
            if create:
                return DEFAULT_USER
            raise UnknownUser(
                f"{store.path} holds no events yet; ingest a file first (uac ingest FILE)"
            )
        users = list(counts)
        raise UnknownUser(
            f"{store.path} holds {len(users)} users ({_user_list(None, users)}); "
            "name one with --user",
            users=users,
        )
    if create or store.has_events(user):
        return user
    users = store.users()
    raise UnknownUser(unknown_user_message(store.path, user, users), users=users)


def unknown_user_message(path: str, user: str, users: list[str]) -> str:
    """``user 'may' has no events in STORE; users here: maya``."""
    return f"user {user!r} has no events in {path}; users here: {_user_list(user, users)}"


def _user_list(user: str | None, users: list[str], shown: int = 10) -> str:
    if not users:
        return "none yet (ingesting a file creates a user)"
    if len(users) <= shown:
        return ", ".join(users)
    close = difflib.get_close_matches(user, users, n=3) if user else []
    first = close or users[:5]
    return f"{', '.join(first)}, ... ({len(users)} in all; `uac users` lists them)"


def check_kind(store: Store, *kinds: str) -> None:
    """A ``QueryError`` unless some event can be of each of ``kinds``: one uac writes, or one
    the log holds (of any user)."""
    if not kinds:
        return
    known = sorted(set(EVENT_KINDS) | set(store.kinds()))
    for kind in kinds:
        if kind not in known:
            raise QueryError(
                f"no event kind {kind!r}.{did_you_mean(kind, known)} Kinds: {', '.join(known)}"
            )

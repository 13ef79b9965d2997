"""Which store and user a `uac` command means, and opening them: the workbench, the store alone, or
a user of it (the default store refused where it would surprise)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from uac_kernel.core.errors import UacError

if TYPE_CHECKING:
    from uac_kernel.log.store import Store
    from uac_kernel.workbench import Workbench

__all__ = ["DEFAULT_DB", "DEMO_DB", "MODEL_FLAGS"]


DEFAULT_DB = "uac.duckdb"


DEMO_DB = "uac-demo.duckdb"


# How the model settings are given here, for ModelSettings.resolve's messages (see model_options).
MODEL_FLAGS = {"model": "--model NAME", "base_url": "--base-url URL", "offline": "--offline"}


def _open(args: argparse.Namespace, *, read_only: bool = False, create: bool = False) -> Workbench:
    """The workbench of ``--user`` (default: the store's only user) in ``--db``.

    Only ``ingest`` creates (a store, a user); for every other command a missing store or a
    user with no events is an error that names the users the store holds.
    """
    from uac_kernel.workbench import Workbench

    if not create:
        _check_default_db(args)
    model = None
    if hasattr(args, "model"):  # only the commands that call a model load the model layer
        from uac_kernel.model.client import ModelSettings

        model = ModelSettings.resolve(
            model=args.model,
            base_url=args.base_url,
            offline=True if args.offline else None,
            spelled=MODEL_FLAGS,
        )
    wb = Workbench(args.db, user=args.user, read_only=read_only, create=create, model=model)
    if args.keep is not None:
        args.keep.append(wb)  # see run(): its state is not freed before the process ends
    return wb


def _open_store(args: argparse.Namespace) -> Store:
    """The store itself, read-only, for the commands about the whole store (no one user)."""
    from uac_kernel.log.store import Store

    _check_default_db(args)
    return Store(args.db, read_only=True)


def _open_user(args: argparse.Namespace) -> tuple[Store, str]:
    """The store, read-only, and the user of ``--user`` (default: its only user) in it, for
    the commands that read the log or the checkpoints: they need no fold of the user's state,
    so they answer in the time of a query, whatever the size of the history."""
    from uac_kernel.log.users import resolve_user

    store = _open_store(args)
    try:
        return store, resolve_user(store, args.user, create=False)
    except BaseException:
        store.close()
        raise


def _check_default_db(args: argparse.Namespace) -> None:
    """Right after `uac demo` the store is uac-demo.duckdb, not the default: say so."""
    if not args.db_given and not Path(args.db).exists() and Path(DEMO_DB).exists():
        raise UacError(
            f"no store at {args.db} (the default; env UAC_DB); the demo's store is here: "
            f"pass --db {DEMO_DB}"
        )

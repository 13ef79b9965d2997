"""Import a fleet directory into a store: the chosen users' live parts, appended in one transaction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from uac_kernel.core.display import plural, shorten
from uac_kernel.core.errors import FleetError
from uac_kernel.fleet.export import _bulk_extends, _bulk_heads, _columns
from uac_kernel.fleet.partition import TABLES, Fleet, _count, _who, parquet_source
from uac_kernel.fleet.verify import verify_fleet
from uac_kernel.log.store import Store

__all__ = ["ImportReport", "import_fleet"]


@dataclass(frozen=True)
class ImportReport:
    """What ``import_fleet`` appended to a store: users new to it, users extended, users it
    already held whole; rows appended per table, and rows erased to follow a fleet's forget."""

    store: str
    new: int = 0
    extended: int = 0
    unchanged: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    erased: int = 0

    def summary(self) -> str:
        text = (
            f"{self.store}: {plural(self.new + self.extended, 'user')} imported ({self.new} new, "
            f"{self.extended} extended), {self.unchanged} already up to date; "
            f"{plural(self.rows.get('events', 0), 'event')}, "
            f"{plural(self.rows.get('model_calls', 0), 'model call')}, "
            f"{plural(self.rows.get('checkpoints', 0), 'checkpoint')} appended"
        )
        if self.erased:
            text += f"; {plural(self.erased, 'row')} erased as a forget in the fleet erased them"
        return text


def _chosen(fleet: Fleet, users: Iterable[str] | None) -> list[str]:
    held = fleet.users()
    if users is None:
        return held
    wanted = sorted(set(users))
    missing = [u for u in wanted if u not in set(held)]
    if missing:
        raise FleetError(
            f"{fleet.root} holds no user {_who(missing[0])}; its users are listed by "
            f"`uac fleet summary {fleet.root}`"
        )
    return wanted


def _live_files(fleet: Fleet, users: Iterable[str]) -> dict[str, list[tuple[Path, str, int]]]:
    """By table, each committed file of ``users`` with its user and commit number."""
    out: dict[str, list[tuple[Path, str, int]]] = {t: [] for t in TABLES}
    for user in users:
        for c in fleet.live(user):
            for table, rel in c["files"].items():
                if table in out:
                    out[table].append((fleet.root / rel, user, int(c["commit"])))
    return out


def import_fleet(
    root: str | Path, store: str | Path, *, users: Iterable[str] | None = None
) -> ImportReport:
    """Append the fleet's users (or ``users``) to the store (created if new), in one
    transaction: a user new to the store whole, a user it holds from where its chains end,
    once the fleet's chains pass through them (else FleetDiverged, nothing imported). Events
    get new store-wide ``seq`` numbers in the order they were recorded; call ids and
    checkpoints keep theirs (the chains cover them)."""
    fleet = Fleet(root)
    chosen = _chosen(fleet, users)
    # what will be imported must pass verify first: the chains of each user over the very
    # files read below (a tampered, repeated, swapped or foreign file is refused, not copied)
    checked = verify_fleet(fleet.root, users=chosen)
    if checked.problems:
        more = f" (and {len(checked.problems) - 1} more)" if len(checked.problems) > 1 else ""
        raise FleetError(
            f"cannot import {fleet.root}: {checked.problems[0]}{more}; `uac verify "
            f"{fleet.root}` lists every problem, nothing was imported"
        )
    files = _live_files(fleet, chosen)
    target = Store(store)
    try:
        with target.writing():
            con = target.con
            con.execute("BEGIN TRANSACTION")
            try:
                report = _import(fleet, con, str(store), chosen, files)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            finally:
                for table in TABLES:
                    con.execute(f"DROP VIEW IF EXISTS temp.imp_{table}")
        if target.compaction_owed:
            target.compact()  # no erased byte stays in the file's free blocks
    except duckdb.Error as exc:
        raise FleetError(
            f"cannot import {fleet.root} into {store} ({shorten(str(exc).splitlines()[0], 160)});"
            f" check it with `uac verify {fleet.root}`, nothing was imported"
        ) from exc
    finally:
        target.close()
    return report


def _import(
    fleet: Fleet,
    con: duckdb.DuckDBPyConnection,
    where: str,
    chosen: list[str],
    files: dict[str, list[tuple[Path, str, int]]],
) -> ImportReport:
    # The fleet's rows are read where they are (views over the files), not copied first.
    for table in TABLES:
        listed = [f for f, _u, _n in files[table]]
        rows_of = parquet_source(listed) if listed else f"main.{table} LIMIT 0"
        con.execute(f"CREATE TEMP VIEW imp_{table} AS SELECT * FROM {rows_of}")
    # A row of another user than its commit's is damage: refuse before anything is written.
    odd = con.execute(
        "SELECT user_id FROM (SELECT user_id FROM imp_events UNION ALL SELECT user_id FROM "
        "imp_model_calls UNION ALL SELECT user_id FROM imp_checkpoints UNION ALL SELECT "
        "user_id FROM imp_checkpoint_segments) WHERE user_id NOT IN (SELECT unnest(?)) LIMIT 1",
        [chosen],
    ).fetchone()
    if odd is not None:
        raise FleetError(
            f"{fleet.root} holds rows of user {_who(str(odd[0]))} in another user's partition; "
            f"check it with `uac verify {fleet.root}`, nothing was imported"
        )
    mine = _bulk_heads(con, chosen)
    held = [u for u in chosen if any(mine[u][t][0] for t in mine[u])]
    # the fleet's chains must pass through the store's heads: the store is not ahead of them
    _bulk_extends(con, {u: mine[u] for u in held}, str(fleet.root), where, prefix="temp.imp_")
    from uac_kernel.checkpoints.forget import follow_forgets  # only forget rewrites a logged row

    erased = follow_forgets(con, held, staged="temp.imp_")
    plan, params = _columns(
        {
            "u": chosen,
            "ev_n": [int(mine[u]["events"][0]) for u in chosen],
            "cp_n": [int(mine[u]["checkpoints"][0]) for u in chosen],
            "call_id": _last_calls(con, chosen),
        }
    )
    rows: dict[str, int] = {}
    last = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
    # New store-wide numbers in recording order; a user's running latest recording time keeps
    # their own events in chain order even if a clock went back.
    events = (
        "INSERT INTO events (seq, user_seq, recorded_at, ts, kind, user_id, source, payload, "
        "salt, payload_hash, hash) "
        "SELECT $last + row_number() OVER (ORDER BY seen_at, user_id, user_seq), user_seq, "
        "recorded_at, ts, kind, user_id, source, payload, salt, payload_hash, hash FROM ("
        "SELECT i.*, max(i.recorded_at) OVER (PARTITION BY i.user_id ORDER BY i.user_seq "
        "ROWS UNBOUNDED PRECEDING) AS seen_at "
        f"FROM temp.imp_events i JOIN {plan} p ON i.user_id = p.u WHERE i.user_seq > p.ev_n)"
    )
    rows["events"] = _count(con.execute(events, {**params, "last": int(last[0]) if last else 0}))
    for table, cond in (
        ("model_calls", "i.call_id > p.call_id"),
        ("checkpoints", "i.version > p.cp_n"),
        ("checkpoint_segments", "i.version > p.cp_n"),
    ):
        rows[table] = _count(
            con.execute(
                f"INSERT INTO {table} BY NAME SELECT i.* FROM temp.imp_{table} i "
                f"JOIN {plan} p ON i.user_id = p.u WHERE {cond}",
                params,
            )
        )
    after = _bulk_heads(con, chosen)
    grown = [u for u in chosen if after[u] != mine[u]]
    new = [u for u in grown if u not in held]
    return ImportReport(
        where,
        new=len(new),
        extended=len(grown) - len(new),
        unchanged=len(chosen) - len(grown),
        rows=rows,
        erased=erased,
    )


def _last_calls(con: duckdb.DuckDBPyConnection, users: list[str]) -> list[int]:
    found = dict(
        con.execute(
            "SELECT user_id, max(call_id) FROM model_calls WHERE user_id IN (SELECT unnest(?)) "
            "GROUP BY user_id",
            [users],
        ).fetchall()
    )
    return [int(found.get(u, 0)) for u in users]

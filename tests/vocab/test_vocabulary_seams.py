"""Outside attacks on the vocabulary's seams (issue 26) not covered by test_vocabulary_attacks:
two processes at once, kill -9 mid-batch, hostile model answers at scale, tampered checkpoint
code, export/import and fleets, and a person rejecting the source of a derived (``via``) role.

Real parts only: DuckDB files in tmp_path, real ``uac`` / python subprocesses, the real openai
client against the local chat server fixture. Each case asserts the safe behaviour."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from uac_kernel.core.errors import CodeError
from uac_kernel.fleet.export import export_store
from uac_kernel.fleet.importing import import_fleet
from uac_kernel.fleet.run import Job, run
from uac_kernel.log.integrity import verify
from uac_kernel.log.store import Store
from uac_kernel.model.testing import ChatServer
from uac_kernel.workbench import Workbench

UAC = str(Path(sys.executable).with_name("uac"))
HANG = 600  # a hang-only timeout, far above any run


def ev(ts: str, type_: str, key_: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "fact", "ts": ts, "op": "add", "type": type_, "key": key_, "fields": fields}


def voc(op: str, binding: dict[str, Any], ts: str = "2025-01-02T09:00:00") -> dict[str, Any]:
    return {"kind": "vocabulary", "ts": ts, "op": op, "binding": binding}


def run_uac(db: Path, *args: str, user: str = "maya") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UAC_DB": str(db), "UAC_USER": user}
    return subprocess.run(
        [UAC, "--db", str(db), "--user", user, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG,
    )


def start_ingest(db: Path, src: Path, out: int) -> subprocess.Popen[str]:
    """A store of maya's holding one note, and a `uac ingest` of ``src`` into it, started."""
    with Workbench(db, user="maya") as wb:
        wb.ingest([ev("2025-01-01T00:00:00", "Note", "n", text="hi")])
    env = {**os.environ, "UAC_DB": str(db), "UAC_USER": "maya"}
    return subprocess.Popen(
        [UAC, "--db", str(db), "--user", "maya", "ingest", str(src)],
        stdout=out,
        stderr=out,
        text=True,
        env=env,
    )


def verified(db: Path) -> str:
    store = Store(db, read_only=True)
    try:
        report = verify(store, None)
    finally:
        store.close()
    return "" if report.ok else report.problem


def keyed(bindings: Any) -> dict[Any, Any]:
    return {b.key: (b.author, b.status, b.via, b.score) for b in bindings}


def vocab_events(db: Path) -> list[dict[str, Any]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT payload FROM events WHERE kind = 'vocabulary' ORDER BY seq"
        ).fetchall()
    finally:
        con.close()
    return [json.loads(r[0]) if isinstance(r[0], str) else r[0] for r in rows]


def count(db: Path, where: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(f"SELECT count(*) FROM events WHERE {where}").fetchone()[0]
    finally:
        con.close()


# -- a user whose drug interaction alert rests on a binding --------------------------------------

ZORBS = [
    ev("2025-01-01T09:00:00", "Zorb", "a", glimmer="sertraline 50mg"),
    ev("2025-01-01T09:00:00", "Zorb", "b", glimmer="phenelzine"),
    voc("add", {"role": "medication", "type": "Zorb"}),
]


def interactions(wb: Workbench) -> list[Any]:
    return [a for a in wb.alerts() if a.rule == "drug_drug_interaction"]


# -- 1. two processes at once ----------------------------------------------------------------------

RACER = r"""
import json, sys, time
from pathlib import Path
from uac_kernel.workbench import Workbench
db, who, go, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
while not go.exists():
    time.sleep(0.001)
errors = []
for i in range(n):
    try:
        with Workbench(db, user="maya") as wb:
            if (i + (who == "B")) % 2 == 0:
                wb.bind("Zorb.glimmer", "medication.name", reason=f"{who}{i}")
            else:
                wb.unbind("Zorb.glimmer", "medication.name", reason=f"{who}{i}")
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
print(json.dumps(errors))
"""


def test_two_processes_bind_and_unbind_the_same_key_at_once(tmp_path: Path) -> None:
    """Both processes' binds succeed, or one says clearly why (in a person's words, not the
    event format's ``op``); the log verifies, folds the same on reopen, and the alert stands
    exactly when the binding that won is read."""
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(ZORBS)
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(db), who, str(go), "12"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("A", "B")
    ]
    go.touch()
    errors: list[str] = []
    for p in procs:
        out, err = p.communicate(timeout=HANG)
        assert p.returncode == 0, err[-2000:]
        errors += json.loads(out.strip().splitlines()[-1])
    for e in errors:
        assert "\n" not in e and "Traceback" not in e, e
        assert "use op" not in e, f"a person's bind fails in the event format's words: {e}"
    assert verified(db) == ""
    last = [v["binding"] for v in vocab_events(db) if v["binding"].get("field") == "glimmer"]
    with Workbench(db, user="maya") as wb:
        live = keyed(wb.vocab().bindings)
        got = wb.state.bound(("medication.name", "Zorb", "glimmer"))
        assert got is not None and got.status == last[-1].get("status", "used")
        assert bool(interactions(wb)) == (got.status == "used")
    with Workbench(db, user="maya", read_only=True) as again:
        assert keyed(again.vocab().bindings) == live


def test_cli_bind_while_cli_ingest_adds_the_field(tmp_path: Path) -> None:
    """``uac vocab bind`` racing a ``uac ingest`` that brings the field (and the matcher's
    proposal for the same key): each run succeeds or says why in one line; the person's
    binding, when it went in, is the one in force; the log verifies."""
    src = tmp_path / "journeys.jsonl"
    src.write_text(
        "\n".join(
            json.dumps(
                ev(
                    f"2025-01-01T09:{i % 60:02d}:00",
                    "Journey",
                    f"j{i}",
                    leaves_on="2025-06-01",
                    back_on="2025-06-09",
                    country="Japan",
                )
            )
            for i in range(300)
        )
        + "\n"
    )
    for attempt in range(2):
        db = tmp_path / f"u{attempt}.duckdb"
        ing = start_ingest(db, src, subprocess.PIPE)
        binds = []
        for _ in range(3):
            binds.append(run_uac(db, "vocab", "bind", "Journey.leaves_on", "trip.start"))
        _, err = ing.communicate(timeout=HANG)
        assert ing.returncode == 0, err[-2000:]
        for r in binds:
            assert "Traceback" not in r.stderr, r.stderr[-2000:]
            if r.returncode != 0:
                assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert verified(db) == ""
        with Workbench(db, user="maya", read_only=True) as wb:
            got = wb.state.bound(("trip.start", "Journey", "leaves_on"))
            assert got is not None and got.status == "used"
            if any(r.returncode == 0 for r in binds):
                assert got.author == "person", got


# -- 2. kill -9 mid-batch --------------------------------------------------------------------------


def big_batch(path: Path, n: int) -> int:
    """A batch of ``n`` facts over 30 new types, each with fields the matcher proposes for."""
    lines = []
    for i in range(n):
        t = i % 30
        lines.append(
            json.dumps(
                ev(
                    f"2025-01-01T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}",
                    f"Voyage{t}",
                    f"k{i}",
                    leaves_on="2025-06-01",
                    back_on="2025-06-09",
                    country="Japan",
                    expires_on="2026-01-01",
                    amount_due=12.5,
                    drug_name="sertraline",
                )
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return n


def test_kill9_mid_ingest_leaves_all_of_the_batch_and_its_proposals_or_none(
    tmp_path: Path,
) -> None:
    src = tmp_path / "big.jsonl"
    n = big_batch(src, 20_000)
    ref = tmp_path / "ref.duckdb"
    r = run_uac(ref, "ingest", str(src))
    assert r.returncode == 0, r.stderr[-2000:]
    full_facts = count(ref, "kind = 'fact'")
    full_vocab = count(ref, "kind = 'vocabulary'")
    assert full_facts == n and full_vocab > 30
    outcomes = []
    for delay in (0.3, 0.7, 0.8, 0.9, 1.0, 1.1, 1.3, 2.5):
        db = tmp_path / f"k{delay}.duckdb"
        p = start_ingest(db, src, subprocess.DEVNULL)
        time.sleep(delay)  # not an assertion: only where in the batch the kill lands
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=HANG)
        facts = count(db, "kind = 'fact'") - 1
        vocab = count(db, "kind = 'vocabulary'")
        outcomes.append((delay, facts, vocab))
        assert (facts, vocab) in ((0, 0), (full_facts, full_vocab)), outcomes
        assert verified(db) == ""
        if (facts, vocab) in [o[1:] for o in outcomes[:-1]]:
            continue  # a rerun after this outcome (none of it, or all) is checked already
        with Workbench(db, user="maya") as wb:  # opens, and a rerun completes the batch
            wb.ingest(src)
            assert (
                wb.store.con.execute(
                    "SELECT count(*) FROM events WHERE kind = 'vocabulary'"
                ).fetchone()[0]
                == full_vocab
            )
            assert keyed(wb.vocab().bindings) == keyed(
                Workbench(ref, user="maya", read_only=True).vocab().bindings
            )


# -- 3. hostile model answers at scale -------------------------------------------------------------

TURN = {
    "kind": "utterance",
    "ts": "2025-05-20T09:00:00",
    "speaker": "user",
    "text": "Rex's pet passport runs out on June 1st; we fly to Japan on June 10th.",
    "source": "chat-1#1",
}


def op(type_: str, key_: str, **fields: Any) -> dict[str, Any]:
    return {
        "op": "add",
        "type": type_,
        "key": key_,
        "fields": [{"name": k, "value": v} for k, v in fields.items()],
        "utterances": ["chat-1#1"],
    }


FORM = op("CouncilForm", "form", title="parking permit form", due_back="2025-05-23", sent=False)


@pytest.fixture
def mwb(model_wb: Workbench) -> Workbench:
    model_wb.ingest([TURN])
    return model_wb


NASTY = "\x1b[2J\x1b[31mRED\x00\u202e\x07" + "z" * 10_000


def test_hundreds_of_hostile_bindings_land_the_facts_and_stay_bounded_and_inert(
    mwb: Workbench, chat_server: ChatServer, tmp_path: Path
) -> None:
    bindings: list[dict[str, Any]] = [
        {"concept": "duty.due", "type": "CouncilForm", "field": "due_back", "reason": NASTY}
    ]
    for i in range(500):
        bindings.append(
            [
                {"concept": f"nonsense.c{i}", "type": "CouncilForm", "field": "due_back"},
                {"concept": "duty.due", "type": f"Ghost{i}", "field": "due_back"},
                {"concept": "duty.due", "type": "CouncilForm", "field": f"nope{i}"},
                {"role": f"role{i}\x1b[0m", "type": "CouncilForm", "reason": NASTY},
                {"concept": "duty.due", "type": "CouncilForm", "field": "due_back"},
            ][i % 5]
        )
    chat_server.enqueue(json.dumps({"operations": [FORM], "bindings": bindings}))
    report = mwb.extract(progress=False)
    assert report.applied == 1 and mwb.state.get("CouncilForm", "form") is not None
    assert len(report.dropped) <= 25, len(report.dropped)
    for note in report.dropped:
        assert "\n" not in note and len(note) < 1000, note
        assert not any(c in note for c in "\x1b\x00\u202e\x07"), repr(note)
    model = [b for b in mwb.vocab().bindings if b.author == "model"]
    assert len(model) == 1
    (b,) = model
    assert len(b.reason) < 1000
    assert mwb.verify().ok
    summary = report.summary()
    assert not any(c in summary for c in "\x1b\x00\u202e\x07")
    db = Path(mwb.store.path)
    mwb.close()
    for args in (("vocab",), ("extract", "--help"), ("alerts",), ("log", "--kind", "vocabulary")):
        out = run_uac(db, *args)
        assert "Traceback" not in out.stderr, out.stderr[-2000:]
        shown = out.stdout + out.stderr
        assert not any(c in shown for c in "\x1b\x00\u202e\x07"), (args, repr(shown[:500]))


@pytest.mark.parametrize(
    "via",
    ["duty.due", "nonsense", "trip.start", {"x": 1}, "duty.due" * 1000],
)
def test_a_model_binding_with_via_is_never_logged_with_a_via_it_did_not_earn(
    mwb: Workbench, chat_server: ChatServer, via: Any
) -> None:
    """``via`` is the matcher's derivation, never the model's word: an answer naming one keeps
    its facts, and no binding the model proposed is logged with that ``via``."""
    binding = {"concept": "duty.due", "type": "CouncilForm", "field": "due_back", "via": via}
    chat_server.enqueue(json.dumps({"operations": [FORM], "bindings": [binding]}))
    report = mwb.extract(progress=False)
    assert report.applied == 1 and mwb.state.get("CouncilForm", "form") is not None
    for b in mwb.vocab().bindings:
        if b.author == "model":
            assert b.via is None, b
    assert mwb.verify().ok


def test_model_binds_a_pets_record_to_the_passport_role_no_critical_passport_alert(
    mwb: Workbench, chat_server: ChatServer
) -> None:
    ops = [
        op("PetPassport", "rex", pet="Rex the dog", expires="2025-06-01", holder="Rex"),
        op(
            "Trip",
            "japan",
            destination="Tokyo",
            country="Japan",
            start="2025-06-10",
            end="2025-06-20",
            international=True,
        ),
        op("Passport", "mine", expires="2031-01-01", holder="me", number="X123"),
    ]
    bindings = [
        {"role": "passport", "type": "PetPassport", "reason": "it is a passport"},
        {"role": "document", "type": "PetPassport", "reason": "a travel document"},
        {"concept": "document.expiry", "type": "PetPassport", "field": "expires"},
        {"concept": "document.holder", "type": "PetPassport", "field": "pet"},
    ]
    chat_server.enqueue(json.dumps({"operations": ops, "bindings": bindings}))
    report = mwb.extract(progress=False)
    assert report.operations == 3
    bad = [
        a
        for a in mwb.alerts()
        if a.severity == "critical" and any(e.type == "PetPassport" for e in a.evidence)
    ]
    assert not bad, [a.message for a in bad]


def test_model_binds_one_field_to_many_concepts_of_other_roles_none_is_read(
    mwb: Workbench, chat_server: ChatServer
) -> None:
    """One date field named as the start of a trip, a document's expiry, a medication's end
    and a duty's due: the type plays none of those roles, so at most the one the matcher
    agrees with is read."""
    concepts = [
        "trip.start",
        "trip.end",
        "document.expiry",
        "duty.due",
        "booking.start",
        "record.since",
        "warranty.end",
        "renewal.date",
    ]
    from uac_kernel.vocab.catalogue import CONCEPTS

    bindings = [
        {"concept": c, "type": "CouncilForm", "field": "due_back", "reason": "it is"}
        for c in concepts
        if c in CONCEPTS
    ]
    chat_server.enqueue(json.dumps({"operations": [FORM], "bindings": bindings}))
    mwb.extract(progress=False)
    used = [
        b
        for b in mwb.vocab().used()
        if b.author == "model" and b.type == "CouncilForm" and b.field == "due_back"
    ]
    assert len(used) <= 1, [b.short() for b in used]
    assert not any(a.category == "rule_error" for a in mwb.alerts())


# -- 4. tampered code, cells, export/import, fleets ------------------------------------------------


def journey_user(db: Path, user: str = "maya") -> None:
    with Workbench(db, user=user) as wb:
        wb.ingest(
            [
                ev("2025-01-01T09:00:00", "Condition", "c", name="asthma"),
                ev(
                    "2025-01-01T09:00:00",
                    "Journey",
                    "j",
                    activity="scuba diving in Egypt",
                    country="Egypt",
                    leaves_on="2025-06-01",
                    back_on="2025-06-10",
                ),
            ]
        )


def clearance(wb: Workbench) -> list[Any]:
    return [a for a in wb.alerts() if a.rule == "activity_medical_clearance"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("'status': 'used'", "'status': 'rejected'"),
        ("'via': 'trip'", "'via': 'planned_activity'"),
        ("'author': 'inferred'", "'author': 'person'"),
    ],
)
def test_tampered_vocabulary_in_stored_code_fails_verify(
    tmp_path: Path, old: str, new: str
) -> None:
    db = tmp_path / "u.duckdb"
    journey_user(db)
    with Workbench(db, user="maya") as wb:
        version = wb.checkpoint().version
        code = wb.code(version)
    assert "vocabulary: list[dict] = [" in code
    quoted = old if old in code else old.replace("'", '"')
    assert quoted in code, code[code.index("vocabulary: list[dict]") :][:2000]
    con = duckdb.connect(str(db))
    n = con.execute(
        "SELECT count(*) FROM checkpoint_segments WHERE version = ? AND strpos(text, ?) > 0",
        [version, quoted],
    ).fetchone()[0]
    assert n >= 1
    con.execute(
        "UPDATE checkpoint_segments SET text = replace(text, ?, ?) WHERE version = ?",
        [quoted, new if old in code else new.replace("'", '"'), version],
    )
    con.close()
    assert verified(db) != ""
    r = run_uac(db, "verify")
    assert r.returncode != 0 and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "extra",
    [
        "v = vocabulary\nv.append({'role': 'trip', 'type': 'Condition'})",
        "globals()['vocabulary'] = []",
        "[vocabulary][0].clear()",
    ],
)
def test_a_cell_that_writes_the_vocabulary_by_another_path_is_refused(
    tmp_path: Path, extra: str
) -> None:
    """The docs promise a cell writing to ``vocabulary`` is refused in one line (the edit
    would be lost): an alias, ``globals()`` or a wrapped list write to it as surely."""
    db = tmp_path / "u.duckdb"
    journey_user(db)
    with Workbench(db, user="maya") as wb:
        version = wb.checkpoint().version
        before = wb.state.seq, keyed(wb.vocab().bindings)
        cell = wb.cell("Journey", version) + extra + "\n"
        with pytest.raises(CodeError) as caught:
            wb.apply_edit(cell, version=version, part="Journey")
        assert "vocabulary" in str(caught.value) and "\n" not in str(caught.value)
        assert (wb.state.seq, keyed(wb.vocab().bindings)) == before


def test_export_import_keeps_bindings_via_and_idle_and_alerts(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    journey_user(db)
    with Workbench(db, user="maya") as wb:
        wb.bind("Journey.activity", "activity.text", reason="what I do there")
        wb.unbind("Journey", "trip", reason="a dive holiday, not a trip")
        want = keyed(wb.vocab().bindings)
        idle = sorted(b.key for b in wb.vocab().idle())
        alerts = sorted((a.rule, a.message) for a in wb.alerts())
        assert any(v[2] for v in want.values()), "a via binding to carry"
        assert idle
    fleet = tmp_path / "fleet"
    r = run_uac(db, "export", str(db), str(fleet))
    assert r.returncode == 0, r.stderr
    back = tmp_path / "back.duckdb"
    r = run_uac(back, "import", str(fleet), str(back))
    assert r.returncode == 0, r.stderr
    with Workbench(back, user="maya", read_only=True) as wb:
        assert keyed(wb.vocab().bindings) == want
        assert sorted(b.key for b in wb.vocab().idle()) == idle
        assert sorted((a.rule, a.message) for a in wb.alerts()) == alerts
    # and through the library, a second time, into a store that holds the user already
    export_store(db, fleet)
    import_fleet(fleet, back)
    with Workbench(back, user="maya", read_only=True) as wb:
        assert keyed(wb.vocab().bindings) == want


def test_fleet_run_over_users_with_bindings_agrees_with_their_stores(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    zorbs = [*ZORBS, voc("add", {"concept": "medication.name", "type": "Zorb", "field": "glimmer"})]
    users = {
        "binds": zorbs,
        "rejects": [
            *zorbs,
            voc(
                "update",
                {"role": "medication", "type": "Zorb", "status": "rejected"},
                ts="2025-01-03T09:00:00",
            ),
        ],
        "none": ZORBS[:2],
    }
    for u, evs in users.items():
        (src / f"{u}.jsonl").write_text("\n".join(json.dumps(e) for e in evs) + "\n")
    root = tmp_path / "fleet"
    ing = run(root, Job("ingest", (str(src),)), engine="local", jobs=1)
    assert (ing.ok, ing.failed) == (3, 0), ing.rows
    res = run(root, Job("alerts"), engine="local", jobs=1)
    assert res.failed == 0, res.rows
    got = {r["user_id"]: r["alerts"] for r in res.rows}
    store = tmp_path / "s.duckdb"
    import_fleet(root, store)
    for u in users:
        with Workbench(store, user=u, read_only=True) as wb:
            assert got[u] == len(wb.alerts()), (u, got, [a.message for a in wb.alerts()])
            assert bool(interactions(wb)) == (u == "binds")


# -- 5. rejecting the source of a derived role -----------------------------------------------------


def test_rejecting_the_source_role_idles_the_derived_one_and_clears_its_alert(
    tmp_path: Path,
) -> None:
    db = tmp_path / "u.duckdb"
    journey_user(db)
    with Workbench(db, user="maya") as wb:
        assert wb.vocab().plays("Journey", "planned_activity")
        (alert,) = clearance(wb)
        assert "planned_activity" in alert.message or "Journey" in alert.message
        report = wb.unbind("Journey", "trip", reason="a dive holiday")
        assert not clearance(wb)
        (cleared,) = [c for c in report.cleared if c.rule == "activity_medical_clearance"]
        assert "vocabulary changed" in cleared.reason, cleared.reason
        assert "Journey" in cleared.reason and (
            "planned_activity" in cleared.reason or "trip" in cleared.reason
        ), cleared.reason
        assert [b.key for b in wb.vocab().idle()] == [("planned_activity", "Journey", None)] or {
            ("planned_activity", "Journey", None)
        } <= {b.key for b in wb.vocab().idle()}
        again = wb.bind("Journey", "trip")
        assert [a.rule for a in again.raised].count("activity_medical_clearance") == 1
        assert clearance(wb)


def test_the_alert_says_it_read_the_derived_role(tmp_path: Path) -> None:
    """An alert that rests on an inferred binding says which binding it read: here the
    Journey is a planned activity only through the matcher's derivation."""
    db = tmp_path / "u.duckdb"
    journey_user(db)
    with Workbench(db, user="maya") as wb:
        (alert,) = clearance(wb)
        assert "[read " in alert.message and "planned_activity" in alert.message, alert.message


def test_rejection_of_the_source_survives_a_snapshot_and_reopen(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    journey_user(db)
    with Workbench(db, user="maya") as wb:
        wb.unbind("Journey", "trip")
        wb.checkpoint()  # writes the snapshot
        want = (keyed(wb.vocab().bindings), sorted(b.key for b in wb.vocab().idle()))
        alerts = sorted(a.message for a in wb.alerts())
    with Workbench(db, user="maya") as wb:
        assert (keyed(wb.vocab().bindings), sorted(b.key for b in wb.vocab().idle())) == want
        assert sorted(a.message for a in wb.alerts()) == alerts
        assert not clearance(wb)
        wb.bind("Journey", "trip")
        wb.checkpoint()
        after = sorted(a.message for a in wb.alerts())
        assert clearance(wb)
    with Workbench(db, user="maya", read_only=True) as wb:
        assert sorted(a.message for a in wb.alerts()) == after
        assert not wb.vocab().idle()


def test_whatif_of_the_rejection_agrees_with_doing_it(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    journey_user(db)
    reject = voc(
        "update",
        {"role": "trip", "type": "Journey", "author": "person", "status": "rejected"},
        ts="2025-01-05T09:00:00",
    )
    with Workbench(db, user="maya") as wb:
        w = wb.whatif([reject])
        predicted = sorted(c.rule for c in w.cleared)
        assert "activity_medical_clearance" in predicted, w.summary()
        assert wb.state.bound(("trip", "Journey", None)).status == "used"  # nothing written
        real = wb.ingest([reject])
        assert sorted(c.rule for c in real.cleared) == predicted
        # and the way back
        accept = voc(
            "update",
            {"role": "trip", "type": "Journey", "author": "person", "status": "used"},
            ts="2025-01-06T09:00:00",
        )
        w2 = wb.whatif([accept])
        real2 = wb.ingest([accept])
        assert sorted(a.rule for a in w2.raised) == sorted(a.rule for a in real2.raised)
        assert "activity_medical_clearance" in [a.rule for a in real2.raised]


def test_rejecting_a_source_concept_idles_the_concepts_derived_from_it(tmp_path: Path) -> None:
    """``Journey.leaves_on`` rejected as trip.start: booking.start, record.since ...  derived
    via trip.start stop being read, and a later batch does not bring them back."""
    db = tmp_path / "u.duckdb"
    journey_user(db)
    with Workbench(db, user="maya") as wb:
        derived = [b.key for b in wb.vocab().bindings if b.via == "trip.start"]
        assert derived
        wb.unbind("Journey.leaves_on", "trip.start")
        idle = {b.key for b in wb.vocab().idle()}
        assert set(derived) <= idle
        assert "leaves_on" not in wb.vocab().fields("Journey", "booking.start")
        wb.ingest(
            [
                ev(
                    "2025-01-07T09:00:00",
                    "Journey",
                    "j2",
                    activity="hike",
                    country="Peru",
                    leaves_on="2025-08-01",
                    back_on="2025-08-10",
                    budget_note="cheap",
                )
            ]
        )
        assert "leaves_on" not in wb.vocab().fields("Journey", "booking.start")
        assert wb.state.bound(("trip.start", "Journey", "leaves_on")).status == "rejected"


def test_a_via_loop_in_the_log_reads_neither_and_folds_the_same_on_reopen(tmp_path: Path) -> None:
    """Two derived bindings each standing on the other: neither is read (no source is a
    person's, model's or matcher's plain word), nothing hangs, code round-trips."""
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(
            [
                ev("2025-01-01T09:00:00", "Zorb", "a", glimmer="sertraline 50mg"),
                ev("2025-01-01T09:00:00", "Zorb", "b", glimmer="phenelzine"),
                voc(
                    "add",
                    {
                        "role": "medication",
                        "type": "Zorb",
                        "author": "inferred",
                        "via": "supplement",
                    },
                ),
                voc(
                    "add",
                    {
                        "role": "supplement",
                        "type": "Zorb",
                        "author": "inferred",
                        "via": "medication",
                    },
                ),
                voc(
                    "add",
                    {
                        "concept": "medication.name",
                        "type": "Zorb",
                        "field": "glimmer",
                        "author": "inferred",
                    },
                ),
            ]
        )
        assert not wb.vocab().plays("Zorb", "medication")
        assert not wb.vocab().plays("Zorb", "supplement")
        assert not interactions(wb)
        v = wb.checkpoint().version
        code = wb.code(v)
    r = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=HANG
    )
    assert r.returncode == 0, r.stderr[-2000:]
    with Workbench(db, user="maya", read_only=True) as wb:
        assert not wb.vocab().plays("Zorb", "medication")
        assert wb.verify().ok


def test_model_binds_a_clients_medications_to_the_medication_role_no_interaction(
    mwb: Workbench, chat_server: ChatServer
) -> None:
    """A nurse's log of clients' drugs, bound by the model as the user's medication: the
    matcher's own proposals never use a personal role for someone else's record, and its
    judgement of the model's binding must not either."""
    ops = [
        op("ClientMedication", "c1", client="Mr Brown", drug="sertraline 50mg"),
        op("ClientMedication", "c2", client="Mrs Green", drug="phenelzine"),
    ]
    bindings = [
        {"role": "medication", "type": "ClientMedication", "reason": "medications"},
        {"concept": "medication.name", "type": "ClientMedication", "field": "drug"},
    ]
    chat_server.enqueue(json.dumps({"operations": ops, "bindings": bindings}))
    report = mwb.extract(progress=False)
    assert report.operations == 2
    bad = [a for a in mwb.alerts() if a.rule == "drug_drug_interaction"]
    assert not bad, [a.message for a in bad]


def test_a_derived_role_a_person_rejected_stays_rejected_when_its_source_comes_back(
    tmp_path: Path,
) -> None:
    db = tmp_path / "u.duckdb"
    journey_user(db)
    with Workbench(db, user="maya") as wb:
        wb.unbind("Journey", "planned_activity", reason="no clearance needed")
        assert not clearance(wb)
        wb.unbind("Journey", "trip")
        wb.bind("Journey", "trip")
        assert not wb.vocab().plays("Journey", "planned_activity")
        assert not clearance(wb)
        # a later batch with a new field does not bring the derived role back either
        wb.ingest(
            [
                ev(
                    "2025-01-08T09:00:00",
                    "Journey",
                    "j3",
                    activity="scuba diving",
                    country="Malta",
                    leaves_on="2025-09-01",
                    back_on="2025-09-05",
                    travellers=["me"],
                )
            ]
        )
        assert not wb.vocab().plays("Journey", "planned_activity")
        assert not clearance(wb)

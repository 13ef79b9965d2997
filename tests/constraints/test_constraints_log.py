"""Constraints as events in the log: validated like facts, folded into the constraints in force
with their history, compiled into rules in the workbench, forgotten and verified like the rest
of the log; on real DuckDB files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.constraints import TAX
from helpers.events import fact
from helpers.store import append

from uac_kernel.constraints import Moment, Obligation, Select, parse_constraint
from uac_kernel.core.errors import ConstraintError, EventError, FoldError
from uac_kernel.core.limits import Limits
from uac_kernel.ingest.events import parse_objects, plan_batch
from uac_kernel.log.integrity import verify
from uac_kernel.log.store import Store
from uac_kernel.state.fold import State, fold
from uac_kernel.workbench import Workbench

HOSTILE = "'''\"; import os; os.system('x') #\x1b[31m </div><script>alert(1)</script>{0}"


def constraint(
    ts: str, op: str, key: str, body: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    ev: dict[str, Any] = {"kind": "constraint", "ts": ts, "op": op, "key": key, **extra}
    if body is not None:
        ev["constraint"] = body
    return ev


def clock(ts: str) -> dict[str, Any]:
    """An utterance that moves the log's clock to ``ts``."""
    return {"kind": "utterance", "ts": ts, "speaker": "user", "text": "hello", "source": f"u@{ts}"}


# -- events and fold ----------------------------------------------------------------------


def test_constraint_events_fold_into_the_constraints_in_force_with_history(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    state = State("me")
    append(
        store,
        state,
        [constraint("2025-03-01", "add", "tax", TAX, author="me", derived_from=["c#1"])],
    )
    cv = state.constraints["tax"]
    assert cv.constraint == parse_constraint(TAX) and cv.author == "me"
    assert cv.derived_from == ("c#1",) and cv.sources == (1,)
    assert state.take_changed_constraints() == {"tax"} and state.take_changed_constraints() == set()
    append(store, state, [constraint("2025-03-02", "update", "tax", {**TAX, "lead_days": 10})])
    now = state.constraints["tax"]
    assert now.constraint.lead_days == 10 and now.sources == (1, 2) and now.author == "me"
    append(store, state, [constraint("2025-03-03", "retract", "tax", reason="done early")])
    assert state.constraints == {}
    first, second = state.constraint_history
    assert first.valid_to is not None and not first.retracted
    assert second.retracted and second.ended_because == "done early"
    # the fold of the log from scratch is the same
    again = fold("me", store.events("me"))
    assert again.constraint_history == state.constraint_history
    store.close()


@pytest.mark.parametrize(
    ("events", "field", "words"),
    [
        ([constraint("2025-03-01", "update", "tax", TAX)], "key", "not in force; add it first"),
        ([constraint("2025-03-01", "retract", "tax")], "key", "nothing to retract"),
        (
            [
                constraint("2025-03-01", "add", "tax", TAX),
                constraint("2025-03-02", "add", "tax", TAX),
            ],
            "key",
            "already in force",
        ),
        (
            [
                constraint("2025-03-02", "add", "tax", TAX),
                constraint("2025-03-01", "update", "tax", TAX),
            ],
            "ts",
            "before the current version",
        ),
        (
            [constraint("2025-03-01", "add", "tax", {**TAX, "lead_days": -1})],
            "constraint.lead_days",
            "greater",
        ),
        (
            [constraint("2025-03-01", "add", "tax", {**TAX, "due": {}})],
            "constraint.due",
            "a moment needs",
        ),
        (
            [constraint("2025-03-01", "add", "tax", {**TAX, "code": "1+1"})],
            "constraint.code",
            "Extra",
        ),
        (
            [constraint("2025-03-01", "add", "tax", {**TAX, "kind": "eval"})],
            "constraint.kind",
            "tag",
        ),
        ([constraint("2025-03-01", "add", "tax")], "constraint", "needs the whole constraint"),
        ([constraint("2025-03-01", "retract", "tax", TAX)], "constraint", "carries no constraint"),
        ([constraint("2025-03-01", "add", "", TAX)], "key", "non-empty"),
        ([constraint("2025-03-01", "add", "tax", TAX, fields={})], "fields", "unknown field"),
    ],
)
def test_bad_constraint_events_name_line_and_field(
    events: list[dict[str, Any]], field: str, words: str
) -> None:
    with pytest.raises(EventError) as err:
        plan_batch(State("me"), parse_objects(events, "in.jsonl"))
    assert err.value.field == field and words in err.value.reason
    assert err.value.origin == "in.jsonl" and err.value.line == len(events)
    assert "\n" not in str(err.value)


def test_constraints_in_force_are_bounded_by_the_limits() -> None:
    limits = Limits(constraints=2)
    events = [constraint("2025-03-01", "add", f"k{i}", TAX) for i in range(3)]
    with pytest.raises(EventError, match="more than the 2 a user may have"):
        plan_batch(State("me"), parse_objects(events), limits)
    # a retract in the same batch makes room
    events.insert(2, constraint("2025-03-01", "retract", "k0"))
    assert len(plan_batch(State("me"), parse_objects(events), limits)) == 4


def test_the_log_holds_the_canonical_json() -> None:
    verbose = {**TAX, "severity": "warning", "cites": None}
    (ev,) = plan_batch(
        State("me"), parse_objects([constraint("2025-03-01", "add", "tax", verbose)])
    )
    assert ev.payload["constraint"] == TAX


def test_a_log_written_by_other_tools_is_a_fold_error() -> None:
    from uac_kernel.log.store import LoggedEvent

    bad = LoggedEvent(1, None, None, "constraint", "me", None, {"op": "update", "key": "k"}, "")  # type: ignore[arg-type]
    with pytest.raises(FoldError, match="not in force"):
        fold("me", [bad])


# -- the workbench ------------------------------------------------------------------------


def tax_wb(path: Path | str = ":memory:") -> Workbench:
    wb = Workbench(path)
    wb.ingest([clock("2025-04-01T09:00:00")])
    return wb


def test_constrain_puts_a_rule_in_force_and_a_record_that_does_it_clears_it(tmp_path: Path) -> None:
    wb = tax_wb(tmp_path / "s.duckdb")
    report = wb.constrain(uac_obligation(), key="tax", derived_from=["u@1"], reason="said so")
    assert report.constraints == ["tax"] and len(report.raised) == 1
    (alert,) = [a for a in wb.alerts() if wb.constraint_of(a.rule) is not None]
    assert wb.constraint_of(alert.rule).key == "tax"  # type: ignore[union-attr]
    (ev,) = wb.log(kinds=["constraint"])
    assert ev.payload["op"] == "add" and ev.payload["derived_from"] == ["u@1"]
    done = wb.ingest([fact("2025-04-02T09:00:00", "add", "TaxReturn", "2024", filed=True)])
    assert [a.id for a in done.cleared] == [alert.id]
    assert not [a for a in wb.alerts() if a.rule == alert.rule]
    wb.close()


def uac_obligation(**change: Any) -> Obligation:
    given: dict[str, Any] = {"lead_days": 30, **change}
    return Obligation(
        title="File the tax return",
        due=Moment(date="2025-04-15"),  # type: ignore[arg-type]
        done_by=Select(type="TaxReturn"),
        **given,
    )


def test_constrain_takes_dicts_and_lists_and_makes_unique_keys_from_titles() -> None:
    wb = tax_wb()
    one = wb.constrain(TAX)
    assert one.constraints == ["file-the-tax-return"]
    again = wb.constrain(TAX)  # already in force as given: nothing appended
    assert again.constraints == ["file-the-tax-return"] and again.appended == 0
    two = wb.constrain([{**TAX, "lead_days": 5}, {**TAX, "lead_days": 6}])
    assert two.constraints == ["file-the-tax-return-2", "file-the-tax-return-3"]
    assert [cv.key for cv in wb.constraints()] == [
        "file-the-tax-return",
        "file-the-tax-return-2",
        "file-the-tax-return-3",
    ]
    with pytest.raises(ConstraintError, match="one key"):
        wb.constrain([TAX, TAX], key="k")
    with pytest.raises(ConstraintError, match=r"constraint 2: lead_days"):
        wb.constrain([TAX, {**TAX, "lead_days": "soon"}])
    wb.close()


def test_update_re_evaluates_and_retract_clears_with_its_reason() -> None:
    wb = tax_wb()
    wb.constrain(uac_obligation(), key="tax")
    name = wb.constraint_of(wb.alerts()[0].rule).key  # type: ignore[union-attr]
    assert name == "tax"
    # a lead time that does not reach today yet: the alert clears, saying the constraint changed
    updated = wb.constrain(uac_obligation(lead_days=3), key="tax")
    assert updated.constraints == ["tax"] and len(updated.cleared) == 1
    assert "constraint 'tax' was updated" in updated.cleared[0].reason
    assert wb.log(kinds=["constraint"])[-1].payload["op"] == "update"
    wb.constrain(uac_obligation(), key="tax")
    assert len([a for a in wb.alerts() if a.rule.startswith("constraint_")]) == 1
    gone = wb.retract_constraint("tax", reason="the accountant files it")
    assert [c.reason for c in gone.cleared] == [
        "constraint 'tax' was retracted: the accountant files it"
    ]
    assert not [a for a in wb.alerts() if a.rule.startswith("constraint_")]
    assert wb.constraints() == []
    assert [v.retracted for v in wb.constraints(history=True)] == [False, False, True]
    with pytest.raises(ConstraintError, match="no constraint 'tax' is in force"):
        wb.retract_constraint("tax")
    # the alert log says when it was raised and why it cleared
    states = [(e.payload["state"], e.payload.get("reason", "")) for e in wb.alert_history()]
    assert states[-1] == ("cleared", "constraint 'tax' was retracted: the accountant files it")
    wb.close()


def test_a_failed_batch_leaves_the_log_byte_identical(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    wb = tax_wb(db)
    wb.constrain(TAX, key="tax")
    before = [(e.seq, e.kind, json.dumps(e.payload), e.hash) for e in wb.store.events(erased=True)]
    batch = [
        fact("2025-04-02", "add", "TaxReturn", "2024", filed=True),
        constraint("2025-04-02", "add", "other", TAX),
        constraint("2025-04-02", "add", "tax", TAX),  # already in force
    ]
    with pytest.raises(EventError, match="already in force"):
        wb.ingest(batch)
    after = [(e.seq, e.kind, json.dumps(e.payload), e.hash) for e in wb.store.events(erased=True)]
    assert after == before and list(wb.state.constraints) == ["tax"]
    wb.close()


def test_reopening_a_store_puts_the_same_constraints_and_alerts_in_force(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    wb = tax_wb(db)
    wb.constrain(uac_obligation(), key="tax")
    wb.constrain({**TAX, "title": HOSTILE, "done_by": {"type": "Filing"}}, key=HOSTILE)
    alerts, constraints = wb.alerts(), wb.constraints()
    logged = len(wb.alert_history())
    wb.close()
    again = Workbench(db)
    assert again.alerts() == alerts and again.constraints() == constraints
    assert len(again.alert_history()) == logged  # nothing raised or cleared anew on open
    assert verify(again.store, "me").ok
    again.close()


def test_forget_by_source_takes_the_constraint_out_of_force_and_verify_holds(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.duckdb"
    wb = tax_wb(db)
    wb.ingest(
        [{**clock("2025-04-01T09:30:00"), "text": "remind me to file my taxes", "source": "chat#9"}]
    )
    wb.constrain(uac_obligation(), key="tax", source="ex#1", derived_from=["chat#9"])
    wb.constrain(uac_obligation(lead_days=20), key="tax")
    assert wb.alerts() and wb.constraints()
    plan = wb.forget(source="ex#1")
    assert {e.kind for e in plan.events} >= {"constraint", "utterance", "alert"}
    assert wb.constraints() == [] and not [
        a for a in wb.alerts() if a.rule.startswith("constraint_")
    ]
    assert verify(wb.store, "me").ok
    wb.close()
    raw = db.read_bytes()
    assert b"remind me to file" not in raw
    again = Workbench(db)
    assert again.constraints() == [] and again.constraints(history=True) == []
    again.close()


def test_forget_by_text_erases_a_constraint_title() -> None:
    wb = tax_wb()
    wb.constrain({**TAX, "title": "Renew the Quorblax permit"}, key="permit")
    assert "Quorblax" in wb.checkpoint().code
    wb.forget(text="Quorblax")
    assert wb.constraints() == []
    assert "Quorblax" not in wb.code(1) and verify(wb.store, "me").ok
    assert not any("Quorblax" in json.dumps(e.payload) for e in wb.store.events(erased=True))
    wb.close()


def test_the_uac_package_builds_constraints_for_the_workbench() -> None:
    import uac

    c = uac.Obligation(title="Pay rent", due=uac.Moment(date="2025-04-03"), lead_days=5)  # type: ignore[arg-type]
    assert "Obligation" in uac.__all__ and "constraints" in uac.__all__
    assert (
        uac.parse_constraint(
            {
                "kind": "obligation",
                "title": "Pay rent",
                "due": {"date": "2025-04-03"},
                "lead_days": 5,
            }
        )
        == c
    )
    with uac.Workbench() as wb:
        wb.ingest([clock("2025-04-01T09:00:00")])
        report = wb.constrain(c)
        assert report.constraints == ["pay-rent"] and [a.severity for a in report.raised] == [
            "critical"
        ]


# -- checkpoint code ------------------------------------------------------------------------

IMPORT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("model", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
print(json.dumps({"constraints": mod.constraints, "rules": sorted(r.name for r in mod.rules)}))
"""


def test_checkpoint_code_holds_the_constraints_as_literals_and_imports_clean(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    from uac_kernel.checkpoints.codegen import parse_module, render_module
    from uac_kernel.constraints import constraint_json

    db = tmp_path / "s.duckdb"
    wb = tax_wb(db)
    hostile = {**TAX, "title": HOSTILE, "done_by": {"type": "Filing", "mentions": [HOSTILE[:80]]}}
    wb.constrain(hostile, key=HOSTILE)
    wb.constrain(TAX, key="tax")
    code = wb.checkpoint().code
    assert code == render_module(wb.state, wb._code_rules())  # incremental == full, same bytes
    assert "constraint_" not in code.split("# Constraints in force")[0]  # not listed as rules
    path = tmp_path / "model.py"
    path.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-I", "-c", IMPORT, str(path)],
        capture_output=True, text=True, cwd=tmp_path, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got["constraints"] == {HOSTILE: constraint_json(parse_constraint(hostile)), "tax": TAX}
    assert "constraint" not in " ".join(got["rules"])
    assert not (tmp_path / "x").exists()
    # the module reads back by its literals, the constraints block ignored as data
    assert set(parse_module(code).types) == set(wb.state.types)
    # a retract changes the block; the same log renders the same bytes when folded again
    wb.retract_constraint("tax")
    code2 = wb.checkpoint().code
    assert "'tax'" not in code2.split("# Constraints in force")[1]
    wb.close()
    again = Workbench(db)
    assert render_module(again.state, again._code_rules()) == code2
    again.close()


def test_editing_the_constraints_block_in_a_cell_says_to_use_a_constraint_cell() -> None:
    from uac_kernel.core.errors import CodeError

    wb = tax_wb()
    wb.ingest([fact("2025-04-01", "add", "Trip", "t1", destination="Oslo")])
    wb.constrain(TAX, key="tax")
    version = wb.checkpoint().version
    cell = wb.cell("Trip") + "\nconstraints = {'tax': {}}\n"
    with pytest.raises(CodeError, match="%%uac constraint"):
        wb.apply_edit(cell, version=version, part="Trip")
    assert list(wb.state.constraints) == ["tax"]
    wb.close()


# -- alert inspector and marimo -------------------------------------------------------------


def test_the_alert_inspector_shows_the_constraint_behind_an_alert() -> None:
    from uac_kernel.notebook.widget_base import asset
    from uac_kernel.notebook.widgets import AlertInspector

    wb = tax_wb()
    wb.constrain({**TAX, "title": HOSTILE}, key=HOSTILE)
    wb.ingest([fact("2025-04-01T10:00:00", "add", "Trip", "t", destination="Oslo")])
    inspector = AlertInspector(wb)
    (shown,) = [a for a in inspector.alerts if a["constraint"] is not None]
    assert shown["constraint"]["key"] == HOSTILE and shown["constraint"]["title"] == HOSTILE.strip()
    assert json.loads(shown["constraint"]["json"])["lead_days"] == 30
    js = asset("alert_inspector.js")
    assert "innerHTML" not in js and 'h("pre", { class: "uac-json", text: c.json })' in js
    wb.close()


def test_marimo_constrain_and_constraints_table() -> None:
    pytest.importorskip("marimo")
    import uac.marimo as um

    wb = tax_wb()
    keys, view = um.constrain(
        wb, "kind: obligation\ntitle: Pay <b>rent</b>\ndue: {date: 2025-04-03}\n"
    )
    assert keys == ["pay-b-rent-b"] and "&lt;b&gt;rent" in view.text and "<b>rent" not in view.text
    keys, view = um.constrain(wb, "kind: obligation\ntitle: x\n")
    assert keys == [] and "due: Field required" in view.text
    assert list(wb.state.constraints) == ["pay-b-rent-b"]
    table = um.constraints_table(wb)
    assert type(table).__name__ == "table"
    wb.close()


def test_sql_has_a_table_of_the_constraints_in_force() -> None:
    wb = tax_wb()
    wb.constrain(TAX, key="tax")
    wb.constrain({**TAX, "title": HOSTILE}, key="odd")
    rows = wb.sql("SELECT key, kind, title, json->>'lead_days', rule FROM uac_constraints").rows
    assert rows == [
        ("tax", "obligation", "File the tax return", "30", "constraint_tax"),
        ("odd", "obligation", HOSTILE.strip(), "30", "constraint_odd"),
    ]
    wb.retract_constraint("tax")
    assert wb.sql("SELECT key FROM uac_constraints").rows == [("odd",)]
    with pytest.raises(EventError, match="the SQL view's table uac_constraints"):
        wb.ingest([fact("2025-04-02", "add", "Uac_constraints", "k", x=1)])
    wb.close()


def test_a_batch_that_settles_an_alert_and_retitles_its_constraint_names_the_record() -> None:
    """The record that settled it is the reason, not the retitling beside it in the batch."""
    wb = tax_wb()
    wb.constrain(uac_obligation(), key="tax")
    assert [a for a in wb.alerts() if wb.constraint_of(a.rule) is not None]
    report = wb.ingest(
        [
            fact("2025-04-02T09:00:00", "add", "TaxReturn", "2024", filed=True),
            constraint("2025-04-02T09:00:00", "update", "tax", {**TAX, "title": "File taxes"}),
        ]
    )
    (cleared,) = report.cleared
    assert "was updated" not in cleared.reason and "TaxReturn" in cleared.reason, cleared.reason
    wb.close()


def test_an_open_compiles_each_constraint_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the log and from a snapshot (with a constraint added after it)."""
    from uac_kernel.constraints import inforce

    compiled: list[str] = []
    real = inforce.in_force_rule

    def counted(cv: Any) -> Any:
        compiled.append(cv.key)
        return real(cv)

    for snapshot in (False, True):
        db = tmp_path / f"{snapshot}.duckdb"
        wb = tax_wb(db)
        wb.constrain(uac_obligation(), key="tax")
        if snapshot:
            wb.checkpoint()  # writes the snapshot
        wb.constrain({**TAX, "title": "Pay the council tax"}, key="council")
        wb.close()
        with monkeypatch.context() as m:
            m.setattr(inforce, "in_force_rule", counted)
            compiled.clear()
            again = Workbench(db)
        assert (again._snap is not None) == snapshot
        assert sorted(compiled) == ["council", "tax"], snapshot
        assert len([a for a in again.alerts() if again.constraint_of(a.rule)]) == 2
        again.close()

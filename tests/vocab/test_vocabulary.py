"""The ``vocabulary`` event kind: bindings logged, folded, rendered, verified, forgotten,
tried in a what-if, kept in snapshots and fleets, and made through ``uac vocab`` and
``%%uac vocab`` — over a real DuckDB file, real ``uac`` processes and a real IPython shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.magics import run, shell_with_store, usage_error, widget_outputs
from helpers.store import check, tamper
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from uac_kernel.checkpoints.codegen import parse_module, render_module
from uac_kernel.checkpoints.snaptypes import SnapTypeState
from uac_kernel.core.errors import EventError, VocabularyError
from uac_kernel.fleet.export import export_store
from uac_kernel.fleet.importing import import_fleet
from uac_kernel.log.store import Store
from uac_kernel.notebook.widgets_act import VocabView
from uac_kernel.vocab.binding import Binding
from uac_kernel.vocab.log import binding_json
from uac_kernel.workbench import Workbench

# Two drugs that must never be taken together, in words no matcher reads: a `Zorb` type whose
# drug is in `glimmer`. The shipped drug_drug_interaction rule reads neither name until a
# person binds them.
ZORBS = [
    {"kind": "fact", "ts": "2025-03-01", "op": "add", "type": "Zorb", "key": "a",
     "fields": {"glimmer": "sertraline 50mg", "frob": 2}},
    {"kind": "fact", "ts": "2025-03-01", "op": "add", "type": "Zorb", "key": "b",
     "fields": {"glimmer": "phenelzine", "frob": 1}},
]  # fmt: skip
PLAYS = {"role": "medication", "type": "Zorb"}
NAMED = {"concept": "medication.name", "type": "Zorb", "field": "glimmer"}


def scripts(field: str = "drugName") -> list[dict[str, Any]]:
    """The same two drugs in someone else's words the matcher reads: `Script.drugName`."""
    return [
        {**e, "type": "Script", "fields": {field: e["fields"]["glimmer"], "refills": 1}}
        for e in ZORBS
    ]


SECRET = "told by Dr Quillfeather"


def vocab_event(op: str, binding: dict[str, Any], ts: str = "2025-03-02") -> dict[str, Any]:
    return {"kind": "vocabulary", "ts": ts, "op": op, "binding": binding}


def write_jsonl(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


@pytest.fixture
def wb(db: Path) -> Iterator[Workbench]:
    # the vocabulary's events and faces, apart from the matcher (which would hold proposals for
    # the drug names in `glimmer`: a medication's or an allergy's)
    with Workbench(db, user="maya", propose_bindings=False) as w:
        w.ingest(ZORBS)
        yield w


def interaction(alerts: list[Any]) -> list[Any]:
    return [a for a in alerts if a.rule == "drug_drug_interaction"]


# -- the event -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("binding", "field", "says"),
    [
        (
            {**NAMED, "concept": "medication.nme"},
            "binding.concept",
            "Did you mean 'medication.name'?",
        ),
        ({**PLAYS, "role": "medicaton"}, "binding.role", "Did you mean 'medication'?"),
        ({"concept": "medication.name", "type": "Zorb"}, "binding.field", "give the field"),
        ({**PLAYS, "field": "glimmer"}, "binding.field", "a role binding names a type"),
        ({**NAMED, "type": "Zorbb"}, "binding.type", "Did you mean 'Zorb'?"),
        ({**NAMED, "field": "glim"}, "binding.field", "Its fields: glimmer, frob"),
        ({**NAMED, "field": "frob"}, "binding.field", "Zorb.frob holds int"),
        ({**NAMED, "author": "robot"}, "binding.author", "inferred, model, person"),
        ({**NAMED, "score": 1.5}, "binding.score", "from 0 to 1"),
        ({**NAMED, "status": "maybe"}, "binding.status", "used, held, rejected"),
        ({**PLAYS, "via": "medication.name"}, "binding.via", "the role this binding was derived"),
        ({**NAMED, "via": ["x"]}, "binding.via", "the concept this binding was derived"),
        ({**PLAYS, "via": "medication"}, "binding.via", "derived from"),
    ],
)
def test_event_errors_name_file_line_and_field(
    wb: Workbench, tmp_path: Path, binding: dict[str, Any], field: str, says: str
) -> None:
    path = write_jsonl(tmp_path / "v.jsonl", [ZORBS[0], vocab_event("add", binding)])
    before = wb.store.con.execute("SELECT count(*) FROM events").fetchone()
    with pytest.raises(EventError) as caught:
        wb.ingest(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: field {field!r}: ") and says in message, message
    assert "\n" not in message
    # the whole batch is refused: the log is as it was
    assert wb.store.con.execute("SELECT count(*) FROM events").fetchone() == before


def test_a_rejected_binding_may_name_what_the_user_lacks_and_hides_a_default(
    wb: Workbench,
) -> None:
    wb.ingest([vocab_event("add", {"role": "trip", "type": "Trip", "status": "rejected"})])
    assert "Trip" not in wb.vocab().types("trip")
    assert "Vacation" in wb.vocab().types("trip")


def test_a_binding_derived_via_another_is_read_only_while_its_source_is(
    wb: Workbench,
) -> None:
    # what the matcher derives (a type playing medication plays planned_activity as a
    # Medication does) stands on its source: a person's rejection of the source idles it
    derived = {
        "role": "planned_activity",
        "type": "Zorb",
        "author": "inferred",
        "via": "medication",
    }
    wb.ingest([vocab_event("add", {**PLAYS, "author": "inferred"}), vocab_event("add", derived)])
    vocab = wb.vocab()
    assert vocab.plays("Zorb", "planned_activity") and not vocab.idle()
    (b,) = [b for b in vocab.bindings if b.via]
    assert binding_json(b)["via"] == "medication"
    wb.unbind("Zorb", "medication")
    vocab = wb.vocab()
    assert not vocab.plays("Zorb", "planned_activity")
    assert [x.key for x in vocab.idle()] == [("planned_activity", "Zorb", None)]
    assert b.key not in {x.key for x in vocab.used()}
    # the code the checkpoint writes keeps it, and reads back the same
    assert parse_module(render_module(wb.state)).vocab.bindings == wb.state.vocab.bindings
    # accepted again, the derived one is read again
    wb.bind("Zorb", "medication")
    assert wb.vocab().plays("Zorb", "planned_activity")


def test_fold_update_and_retract(wb: Workbench) -> None:
    wb.ingest([vocab_event("add", {**NAMED, "author": "inferred", "score": 0.6,
                                   "status": "held", "reason": "drug in the name"})])  # fmt: skip
    (held,) = wb.vocab().held()
    assert held == Binding("medication.name", "Zorb", "glimmer", "inferred", 0.6,
                           "drug in the name", "held")  # fmt: skip
    assert wb.vocab().fields("Zorb", "medication.name")[0] == "name"  # held: not read
    wb.ingest([vocab_event("update", {**NAMED, "author": "person"})])
    assert wb.vocab().fields("Zorb", "medication.name")[0] == "glimmer"
    assert not wb.vocab().held()
    with pytest.raises(EventError, match="already bound; use op 'update'"):
        wb.ingest([vocab_event("add", NAMED, ts="2025-03-03")])
    wb.ingest([vocab_event("retract", NAMED)])
    assert wb.vocab().bindings == ()
    with pytest.raises(EventError, match="is not bound; nothing to retract"):
        wb.ingest([vocab_event("retract", NAMED, ts="2025-03-04")])


def test_a_binding_raises_the_shipped_rules_alert_and_a_rejection_clears_it(
    wb: Workbench,
) -> None:
    assert not interaction(wb.alerts())
    wb.bind("Zorb", "medication")
    report = wb.bind("Zorb.glimmer", "medication.name")
    (raised,) = interaction(report.raised)
    assert "Zorb 'b' [MAOI] together with Zorb 'a' [SSRI]" in raised.message
    assert "Zorb.glimmer as medication.name (person 1.00)" in raised.message
    assert wb.bind("Zorb.glimmer", "medication.name").appended == 0  # already so
    report = wb.unbind("Zorb", "medication", reason="these are not mine")
    (cleared,) = interaction(report.cleared)
    assert not interaction(wb.alerts())
    # the reason names the binding, not "none of its records changed"
    assert cleared.reason == (
        "the vocabulary changed: Zorb no longer plays medication (rejected by a person); "
        "none of its records changed"
    )


def test_face_errors_are_one_line_with_the_fix(wb: Workbench) -> None:
    with pytest.raises(VocabularyError) as caught:
        wb.bind("Zorb.glimer", "medication.name")
    assert str(caught.value) == (
        "Zorb.glimer as medication.name: Zorb has no field 'glimer'. Did you mean "
        "'glimmer'? Its fields: glimmer, frob"
    )
    with pytest.raises(VocabularyError, match=r"Did you mean 'medication.name'\?"):
        wb.bind("Zorb.glimmer", "medication.nam")


# -- the matcher's proposals, made by ingest ----------------------------------------------------


def proposals(wb: Workbench) -> list[Binding]:
    return [b for b in wb.vocab().bindings if b.author == "inferred"]


def test_an_ingest_in_other_words_proposes_bindings_in_the_same_batch(db: Path) -> None:
    with Workbench(db, user="maya") as wb:
        report = wb.ingest(scripts())
        # the facts, the schema and the proposals are one batch: its alert read the proposals
        # a Script plays what a Medication plays; its drug's name is read where a name is
        assert [(b.key, b.status) for b in proposals(wb)] == [
            (("medication", "Script", None), "used"),
            (("state_period", "Script", None), "used"),
            (("medication.name", "Script", "drugName"), "used"),
            (("activity.text", "Script", "drugName"), "used"),
            (("record.label", "Script", "drugName"), "used"),
        ]
        kinds = [ev.kind for ev in wb.log() if ev.kind != "alert"]
        assert kinds == ["schema", "schema", "schema", "fact", "fact", *["vocabulary"] * 5]
        assert (report.first_seq, report.last_seq) == (1, len(kinds))
        (raised,) = interaction(report.raised)
        assert raised.message.endswith(
            "[read Script plays medication (inferred 1.00); Script.drugName as medication.name "
            "(inferred 1.00); Script.drugName as record.label (inferred 1.00); `uac vocab` says "
            "why]"
        )
        # a person's word over the matcher's: the same alert, now resting on the person's
        wb.bind("Script.drugName", "medication.name")
        (now,) = interaction(wb.alerts())
        assert now.id == raised.id and "Script.drugName as medication.name (person 1.00)" in (
            now.message
        )


def test_a_refused_batch_appends_no_proposals(db: Path) -> None:
    bad = {**scripts()[0], "op": "update", "key": "nobody"}
    with Workbench(db, user="maya") as wb:
        with pytest.raises(EventError, match="does not exist"):
            wb.ingest([*scripts(), bad])
        assert wb.log() == [] and wb.vocab().bindings == ()


def test_a_held_proposal_is_listed_and_never_read(db: Path) -> None:
    with Workbench(db, user="maya") as wb:
        report = wb.ingest(scripts("drug_nmae"))  # a misspelt name: the matcher only holds it
        (held,) = [b for b in wb.vocab().held() if b.field == "drug_nmae"]
        assert held.key == ("medication.name", "Script", "drug_nmae") and held.author == "inferred"
        assert held.score < 0.75 and "'drug_nmae' ~ 'drug'" in held.reason
        assert not interaction(report.raised) and not interaction(wb.alerts())
        # a person's acceptance is a used binding of their own, and the rule reads it
        (raised,) = interaction(wb.bind("Script.drug_nmae", "medication.name").raised)
        assert "Script.drug_nmae as medication.name (person 1.00)" in raised.message


def test_a_persons_unbind_of_a_proposal_is_never_proposed_again(db: Path) -> None:
    with Workbench(db, user="maya") as wb:
        wb.ingest(scripts())
        report = wb.unbind("Script.drugName", "medication.name", reason="a brand, not a drug")
        (cleared,) = interaction(report.cleared)
        assert cleared.reason == (
            "the vocabulary changed: Script.drugName is no longer read as medication.name "
            "(rejected by a person); none of its records changed"
        )
        # a later batch changes Script's schema, so the matcher looks at it again
        later = {**scripts()[0], "op": "update", "ts": "2025-04-01",
                 "fields": {"dose_mg": 50}}  # fmt: skip
        report = wb.ingest([later])
        assert not interaction(report.raised)
        rejected = wb.state.bound(("medication.name", "Script", "drugName"))
        assert rejected is not None and (rejected.author, rejected.status) == ("person", "rejected")
        named = [
            ev.payload["binding"]
            for ev in wb.log(kinds=["vocabulary"])
            if ev.payload["binding"].get("concept") == "medication.name"
        ]
        # proposed once, rejected by a person, never proposed again
        assert [(b["field"], b["author"]) for b in named] == [
            ("drugName", "inferred"), ("drugName", "person"),
        ]  # fmt: skip
    with Workbench(db, user="maya", read_only=True) as again:  # and it folds so from the log
        assert again.state.bound(rejected.key) == rejected


def test_a_model_or_a_person_may_add_over_a_proposal(db: Path) -> None:
    with Workbench(db, user="maya") as wb:
        wb.ingest(scripts())
        mine = {"concept": "medication.name", "type": "Script", "field": "drugName",
                "author": "model", "score": 0.8}  # fmt: skip
        wb.ingest([vocab_event("add", mine)])
        with pytest.raises(EventError, match="already bound; use op 'update'"):
            wb.ingest([vocab_event("add", mine, ts="2025-03-03")])
        bound = wb.state.bound(("medication.name", "Script", "drugName"))
    with Workbench(db, user="maya", read_only=True) as again:
        assert bound is not None and bound.author == "model"
        assert again.state.bound(bound.key) == bound


# -- what no rule reads -------------------------------------------------------------------------

# Zorb's fields in words no rule reads (a drug, a date, an amount in pounds), beside a Gadget
# whose warranty the matcher binds: only Zorb's are blind spots.
BLIND = [
    {**ZORBS[0], "fields": {**ZORBS[0]["fields"], "zapped_on": "2025-05-01", "fee_gbp": 12.5}},
    {"kind": "fact", "ts": "2025-03-01", "op": "add", "type": "Gadget", "key": "g",
     "fields": {"warranty_ends": "2026-01-01"}},
]  # fmt: skip
ZAP_BY = {
    "kind": "obligation", "title": "zap the zorb", "subject": {"type": "Zorb"},
    "due": {"fields": ["zapped_on"]},
}  # fmt: skip


def test_unwatched_lists_what_no_rule_or_constraint_reads_with_the_bind(db: Path) -> None:
    with Workbench(db, user="maya") as wb:
        wb.ingest(BLIND)
        assert [u.describe() for u in wb.unwatched()] == [
            "Zorb.glimmer: looks like a substance (values name one ('sertraline 50mg')); "
            "`uac vocab bind Zorb.glimmer medication.name`",
            "Zorb.zapped_on: looks like a date (a date field); "
            "`uac vocab bind Zorb.zapped_on CONCEPT`",
            "Zorb.fee_gbp: looks like an amount (a number named like payment.amount); "
            "`uac vocab bind Zorb.fee_gbp payment.amount`",
        ]
        # a constraint in force that names a field reads it; so does a rule through a binding
        wb.constrain(ZAP_BY, key="zap")
        wb.bind_all([wb.binding("Zorb", "medication"),
                     wb.binding("Zorb.glimmer", "medication.name")])  # fmt: skip
        assert [(u.type, u.field) for u in wb.unwatched()] == [("Zorb", "fee_gbp")]


def test_unbound_on_every_face(tmp_path: Path, kernel_shell: Any, monkeypatch: Any) -> None:
    write_jsonl(tmp_path / "blind.jsonl", BLIND)
    assert uac("ingest", "blind.jsonl", cwd=tmp_path).returncode == 0
    table = uac("vocab", "--unbound", cwd=tmp_path).stdout.splitlines()
    assert table[0].split("\t") == ["type.field", "looks like", "why", "bind with"]
    assert len(table) == 4 and table[3].split("\t") == [
        "Zorb.fee_gbp", "amount", "a number named like payment.amount",
        "uac vocab bind Zorb.fee_gbp payment.amount",
    ]  # fmt: skip
    done = uac("vocab", "--unbound", "bind", "Zorb", "medication", cwd=tmp_path)
    assert done.returncode != 0 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "--unbound lists what no rule reads" in done.stderr
    monkeypatch.chdir(tmp_path)
    for ip in shell_with_store(kernel_shell, tmp_path / "shell.duckdb", "maya", "blind.jsonl"):
        shown = run(ip, "%uac vocab --unbound")
        assert [r[0] for r in shown.rows] == ["Zorb.glimmer", "Zorb.zapped_on", "Zorb.fee_gbp"]
        assert usage_error(ip, "%uac vocab --unbound roles").startswith("--unbound lists")


# -- code, verify, forget --------------------------------------------------------------------

DESCRIBE = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("checkpoint", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
print(json.dumps(mod.vocabulary))
"""


def test_checkpoint_code_holds_the_bindings_reads_back_and_imports_clean(
    wb: Workbench, tmp_path: Path
) -> None:
    wb.bind("Zorb", "medication")
    wb.bind("Zorb.glimmer", "medication.name", reason="a 'quote' \"and\" \\ breakout\n#")
    wb.unbind("Trip", "trip")
    code = wb.code(wb.checkpoint().version)
    assert parse_module(code).vocab.bindings == wb.state.vocab.bindings
    path = tmp_path / "checkpoint.py"
    path.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-I", "-c", DESCRIBE, str(path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == [binding_json(b) for b in wb.state.vocab.bindings]
    assert render_module(parse_module(code)).count("vocabulary: list[dict]") == 1


def test_verify_catches_a_tampered_binding_in_the_code(wb: Workbench, db: Path) -> None:
    wb.bind("Zorb", "medication")
    wb.checkpoint()
    wb.close()
    assert check(db) == ""
    tamper(
        db,
        "UPDATE checkpoint_segments SET text = replace(text, 'medication', 'supplement') "
        "WHERE segment = '5'",
    )
    assert "checkpoint 1 was changed after it was taken" in check(db)


def test_forget_erases_a_reason_that_holds_the_text_and_keeps_the_names(
    wb: Workbench, db: Path
) -> None:
    wb.bind("Zorb", "medication")
    wb.bind("Zorb.glimmer", "medication.name", reason=SECRET)
    wb.checkpoint()
    plan = wb.forget(text="quillfeather")
    # the binding's events go; so do the alert that quoted the reason and the records it
    # rests on (forget's rule for an alert holding the text: a rule would raise it again)
    assert [ev.kind for ev in plan.events if ev.kind == "vocabulary"] == ["vocabulary"]
    assert wb.vocab().bindings == (Binding("medication", "Zorb", author="person"),)
    assert "Quillfeather" not in wb.code()
    assert "Zorb" in wb.state.schema.types and "glimmer" in wb.state.schema.types["Zorb"]
    wb.close()
    assert check(db) == ""
    store = Store(db, read_only=True)
    held = store.con.execute(
        "SELECT count(*) FROM events WHERE payload ILIKE '%quillfeather%'"
    ).fetchone()
    store.close()
    assert held == (0,)


# -- what-if, snapshots, fleets, SQL ---------------------------------------------------------


def test_whatif_shows_the_bindings_and_the_alert_the_ingest_raises(wb: Workbench) -> None:
    events = [vocab_event("add", PLAYS), vocab_event("add", NAMED)]
    whatif = wb.whatif(events)
    assert whatif.vocabulary == [
        "Zorb plays medication (person 1.00)",
        "Zorb.glimmer as medication.name (person 1.00)",
    ]
    assert "  vocabulary: Zorb plays medication (person 1.00)" in whatif.text()
    assert not wb.vocab().bindings  # nothing was appended
    real = wb.ingest(events)
    assert [a.id for a in interaction(whatif.raised)] == [a.id for a in interaction(real.raised)]
    assert interaction(real.raised)


def test_snapshot_keeps_the_bindings(wb: Workbench, db: Path) -> None:
    wb.bind("Zorb", "medication")
    wb.bind("Zorb.glimmer", "medication.name", reason="by hand")
    wb.checkpoint()  # writes the snapshot
    bindings, alerts = wb.state.vocab.bindings, [a.id for a in wb.alerts()]
    wb.close()
    with Workbench(db, user="maya", read_only=True) as again:
        assert any(isinstance(ts, SnapTypeState) for ts in again.state.types.values())
        assert again.state.vocab.bindings == bindings
        assert [a.id for a in again.alerts()] == alerts


def test_export_and_import_carry_the_bindings(wb: Workbench, db: Path, tmp_path: Path) -> None:
    wb.bind("Zorb", "medication")
    bindings = wb.state.vocab.bindings
    wb.close()
    export_store(db, tmp_path / "fleet")
    import_fleet(tmp_path / "fleet", tmp_path / "copy.duckdb")
    with Workbench(tmp_path / "copy.duckdb", user="maya", read_only=True) as copy:
        assert copy.vocab().bindings == bindings


def test_sql_view_lists_the_bindings(wb: Workbench) -> None:
    wb.bind("Zorb.glimmer", "medication.name", reason="by hand")
    rows = wb.sql("SELECT type, field, concept, role, author, status, reason FROM uac_vocabulary")
    assert rows.rows == [("Zorb", "glimmer", "medication.name", "medication", "person",
                          "used", "by hand")]  # fmt: skip


# -- faces -----------------------------------------------------------------------------------


def uac(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", "--db", "maya.duckdb", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "UAC_USER": "maya"},
    )  # fmt: skip


def test_cli_vocab_bind_raises_the_shipped_alert(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "zorbs.jsonl", ZORBS)
    assert uac("ingest", "zorbs.jsonl", cwd=tmp_path).returncode == 0
    done = uac("vocab", "bind", "Zorb.glimer", "medication.name", cwd=tmp_path)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "Did you mean 'glimmer'?" in done.stderr
    assert "raised" not in uac("vocab", "bind", "Zorb", "medication", cwd=tmp_path).stdout
    done = uac("vocab", "bind", "Zorb.glimmer", "medication.name", "--reason", "mine", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "raised [critical] drug_drug_interaction: Zorb 'b' [MAOI] together with Zorb 'a' [SSRI]"
        in done.stdout
    )
    table = uac("vocab", cwd=tmp_path).stdout.splitlines()
    assert table[0].split("\t") == ["type.field", "concept", "author", "score", "status", "reason"]
    assert "Zorb.glimmer\tmedication.name\tperson\t1.00\tused\tmine" in table
    concepts = uac("vocab", "concepts", cwd=tmp_path).stdout
    assert "medication.name\ttexts\t" in concepts
    assert "\nmedication\t" in uac("vocab", "roles", cwd=tmp_path).stdout


@pytest.fixture
def zorbs_ip(kernel_shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Unlike conftest's ``ip``: the shell with Maya's zorbs (``ZORBS``, a type in her own
    names) ingested into ``maya.duckdb`` in ``tmp_path`` (the working dir)."""
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "zorbs.jsonl", ZORBS)
    yield from shell_with_store(kernel_shell, tmp_path / "maya.duckdb", "maya", "zorbs.jsonl")


def test_vocab_cell_binds_in_one_batch_and_the_line_magic_lists(zorbs_ip: Any) -> None:
    with capture_output() as cap:
        run(
            zorbs_ip,
            "%%uac vocab\n# my names\nbind Zorb medication\nbind Zorb.glimmer medication.name\n",
        )
    assert "2 events appended" in cap.stdout and "[MAOI]" in cap.stdout
    ((view, text),) = widget_outputs(zorbs_ip, "%uac vocab")
    assert isinstance(view, VocabView)
    lines = [ln.split("\t") for ln in text.splitlines()]
    # the person's two, and what the drug names could also be (an allergy's), held unread
    assert lines[0] == ["type.field", "concept", "author", "score", "status", "reason"]
    assert len(lines) == 5  # 4 bindings
    assert any(ln[:5] == ["Zorb", "role allergy", "inferred", "0.68", "held"] for ln in lines)
    assert any(ln == ["Zorb", "role medication", "person", "1.00", "used", ""] for ln in lines)
    with capture_output() as cap:
        result = zorbs_ip.run_cell(
            "%%uac vocab\nbind Zorb.glimmer medication.name\nunbind Zorb.glimer medication.name\n"
        )
    assert isinstance(result.error_in_exec, UsageError)
    assert "Did you mean 'glimmer'?" in str(result.error_in_exec)
    assert "Traceback" not in cap.stderr
    ((view, _),) = widget_outputs(zorbs_ip, "%uac vocab")
    assert len(view.bindings) == 4  # the failed cell appended nothing


def test_vocab_widget_accepts_and_rejects_proposals_through_bind_and_unbind(
    kernel_shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # one proposal used (the role), one held (a misspelt field), in someone else's words
    write_jsonl(tmp_path / "scripts.jsonl", scripts("drug_nmae"))
    for ip in shell_with_store(kernel_shell, tmp_path / "maya.duckdb", "maya", "scripts.jsonl"):
        wb: Workbench = ip.user_ns["wb"]
        ((view, text),) = widget_outputs(ip, "%uac vocab")
        assert "Script.drug_nmae" in text and "held" in text  # the fallback where widgets are not
        held = next(
            b
            for b in view.bindings
            if b["what"] == "Script.drug_nmae" and b["target"] == "medication.name"
        )
        used = next(b for b in view.bindings if b["target"] == "role medication")
        assert (held["what"], held["target"], held["status"]) == (
            "Script.drug_nmae", "medication.name", "held",
        )  # fmt: skip
        assert held["score"] < 0.75 and "'drug_nmae' ~ 'drug'" in held["reason"]
        assert (used["what"], used["target"], used["author"]) == (
            "Script", "role medication", "inferred",
        )  # fmt: skip
        # the front end's hello is answered: a kernel is here, the buttons may work
        served = view.served
        view._on_msg(view, {"action": "hello"}, [])
        assert view.served == served + 1 and view.error == ""
        # a message that is not a decision, or names no binding shown, changes nothing
        seq = wb.state.seq
        view._on_msg(view, {"action": "accept", "key": "Script; DROP"}, [])
        assert view.error.startswith("not a vocabulary decision: ")
        view._on_msg(view, {"action": "accept", "key": ["trip.start", "Script", "x"]}, [])
        assert view.error.startswith("not a binding shown here: ") and wb.state.seq == seq
        # Accept, as the button sends it: a person's used binding, read by the rule at once
        view._on_msg(view, {"action": "accept", "key": held["key"]}, [])
        assert view.error == "" and view.done.startswith(
            "accepted Script.drug_nmae as medication.name; "
        )
        bound = wb.state.bound(("medication.name", "Script", "drug_nmae"))
        assert bound is not None and (bound.author, bound.status) == ("person", "used")
        assert interaction(wb.alerts())
        # Reject: a person's rejection, which clears what rested on it
        view._on_msg(view, {"action": "reject", "key": ["medication", "Script", None]}, [])
        assert view.error == "" and not interaction(wb.alerts())
        rejected = wb.state.bound(("medication", "Script", None))
        assert rejected is not None and (rejected.author, rejected.status) == ("person", "rejected")
        assert [b["what"] for b in view.bindings] == ["Script.drug_nmae"]  # rejected: not shown
        # every decision is a vocabulary event the log holds, as `uac vocab bind` makes
        assert [e.payload["binding"]["author"] for e in wb.log(kinds=["vocabulary"])][-2:] == [
            "person", "person",
        ]  # fmt: skip


def test_vocab_widget_on_a_read_only_workbench_says_why_its_buttons_are_off(
    wb: Workbench, db: Path
) -> None:
    wb.close()
    with Workbench(db, user="maya", read_only=True) as ro:
        view = VocabView(ro)
        assert view.readonly.startswith("this workbench is open read-only")
        before = ro.vocab().bindings
        view.reject("medication", "Zorb", None)
        assert view.error == view.readonly and ro.vocab().bindings == before


def test_vocab_widget_front_end_waits_for_the_kernel_before_enabling_its_buttons() -> None:
    source = VocabView._esm
    assert 'model.send({ action: "hello" })' in source and "NO_KERNEL" in source
    assert "disabled: off" in source

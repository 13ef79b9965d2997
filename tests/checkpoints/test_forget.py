"""``forget`` on a real store file: the content leaves every place uac copied it — log payloads,
model calls, checkpoint code, search, the SQL view, the file's free blocks — and the chains,
which commit to salted payload hashes, still verify; an erasure no forget event names does not.
"""

from __future__ import annotations

import ast
import hashlib
import json
import linecache
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.events import fact

from uac_kernel.core.errors import QueryError
from uac_kernel.log.integrity import heads, verify
from uac_kernel.log.store import Store
from uac_kernel.workbench import Workbench

SECRET = "Zyloprimarex"  # a made-up drug name: it appears nowhere else


def history(secret: str = SECRET) -> list[dict[str, Any]]:
    return [
        {
            "kind": "utterance",
            "ts": "2025-03-01T09:00:00",
            "speaker": "user",
            "text": f"I found out I am allergic to {secret}, badly.",
            "source": "chat#1",
        },
        {
            "kind": "utterance",
            "ts": "2025-03-01T09:01:00",
            "speaker": "user",
            "text": "Also: flying to Lisbon on the 20th.",
            "source": "chat#2",
        },
        {
            **fact("2025-03-01T09:00:00", "add", "Allergy", "allergy-1", substance=secret),
            "source": "fact#1",
            "derived_from": ["chat#1"],
        },
        {
            **fact("2025-03-01T09:01:00", "add", "Trip", "lisbon", destination="Lisbon"),
            "source": "fact#2",
            "derived_from": ["chat#2"],
        },
    ]


def later() -> list[dict[str, Any]]:
    return [
        {
            **fact("2025-04-01T09:00:00", "update", "Allergy", "allergy-1", severity="severe"),
            "source": "fact#3",
        },
        {
            **fact("2025-04-02T09:00:00", "add", "Trip", "porto", destination="Porto"),
            "source": "fact#4",
        },
    ]


def raw(db: Path) -> bytes:
    data = db.read_bytes()
    wal = Path(f"{db}.wal")
    return data + (wal.read_bytes() if wal.exists() else b"")


@pytest.fixture
def wb(db: Path) -> Any:
    wb = Workbench(db, user="maya")
    wb.ingest(history())
    wb.checkpoint()
    wb.store.record_call(
        user="maya",
        purpose="extraction",
        model="m",
        base_url="",
        request_key=hashlib.sha256(b"r").hexdigest(),
        request=json.dumps({"messages": [{"role": "user", "content": history()[0]["text"]}]}),
        response=json.dumps({"content": f'{{"substance": "{SECRET}"}}'}),
        content=f'{{"substance": "{SECRET}"}}',
        tokens_in=10,
        tokens_out=5,
        latency_ms=3.0,
        outcome="ok",
        error="",
    )
    wb.ingest(later())
    wb.checkpoint()
    yield wb
    wb.close()


def test_forgetting_a_record_leaves_no_byte_of_it_in_the_store(wb: Workbench, db: Path) -> None:
    wb.store.con.execute("CHECKPOINT")
    assert SECRET.encode() in raw(db)  # the grep below can see the text when it is there
    kept = heads(wb.store)

    plan = wb.forget(type="Allergy", key="allergy-1")

    assert [e.kind for e in plan.events].count("utterance") == 1  # chat#1, its origin
    assert plan.records == [("Allergy", "allergy-1")] and len(plan.calls) == 1
    assert plan.checkpoints == [1, 2]
    assert SECRET.encode() not in raw(db)
    assert SECRET.lower().encode() not in raw(db).lower()
    # nothing readable through uac either
    con = wb.store.con
    for table in ("events", "model_calls", "checkpoint_segments"):
        rows = con.execute(f"SELECT * FROM {table}").fetchall()
        assert SECRET not in repr(rows), table
    for version in (1, 2):
        code = wb.code(version)
        assert SECRET not in code and "allergy-1" not in code
        ast.parse(code)  # re-rendered code is still a module
    assert "Lisbon" in wb.code(1) and "Porto" in wb.code(2)
    assert not wb.search_index.search(SECRET)
    assert wb.sql("SELECT count(*) AS n FROM Allergy_history").rows == [(0,)]
    assert wb.eval("len(user.all(Trip))") == 2
    # the chains verify, against a head kept before the forget too
    report = wb.verify(all_users=True)
    assert report.ok and report.forgotten > 0
    assert verify(wb.store, kept=kept).ok
    # the forget event names positions and counts, never the content
    forget_ev = wb.log(kinds=["forget"])[-1]
    assert SECRET not in json.dumps(forget_ev.payload)
    assert forget_ev.payload["records"] == 1


def test_a_fresh_open_and_a_reingest_do_not_bring_it_back(wb: Workbench, db: Path) -> None:
    wb.forget(type="Allergy", key="allergy-1")
    wb.close()
    with Workbench(db, user="maya") as again:
        assert again.eval("len(user.all('Allergy'))") == 0
        assert again.ingest(history()).appended == 0  # its sources are known
        assert again.verify().ok
        cp = again.checkpoint()
        assert SECRET not in cp.code


def test_forget_by_text_and_by_source(wb: Workbench, db: Path) -> None:
    plan = wb.forget(text=SECRET.upper(), dry_run=True)
    assert plan.records == [("Allergy", "allergy-1")]
    assert wb.eval("len(user.all('Allergy'))") == 1  # a dry run changes nothing
    assert any(SECRET in line for line in plan.lines())  # shown to the person asking
    plan = wb.forget(source="chat#2")
    assert plan.records == [("Trip", "lisbon")]  # the record extracted from that utterance
    assert wb.eval("sorted(t.key for t in user.all(Trip))") == ["porto"]
    assert wb.verify().ok
    assert wb.forget(source="chat#2").empty  # already forgotten


@pytest.mark.parametrize(
    "what",
    [{}, {"type": "Allergy"}, {"source": "a", "text": "abc"}, {"text": "ab"}, {"text": "  x  "}],
)
def test_forget_says_what_to_give(wb: Workbench, what: dict[str, str]) -> None:
    with pytest.raises(QueryError) as err:
        wb.forget(**what)
    assert "\n" not in str(err.value)


def test_an_erasure_by_hand_is_told_from_a_forget(wb: Workbench, db: Path) -> None:
    wb.forget(type="Allergy", key="allergy-1")
    wb.close()
    con = duckdb.connect(str(db))
    con.execute(
        "UPDATE events SET payload = '{\"forgotten\":true}', salt = '' WHERE user_id = 'maya' "
        "AND kind = 'fact' AND salt <> '' AND user_seq = (SELECT max(user_seq) FROM events "
        "WHERE kind = 'fact' AND salt <> '')"
    )
    con.close()
    store = Store(db, read_only=True)
    report = verify(store, "maya")
    store.close()
    assert not report.ok and "no forget event after it names it" in report.problem


def test_a_forget_event_cannot_be_forged_after_the_fact(wb: Workbench, db: Path) -> None:
    """Naming an erasure needs a forget event in the chain: editing one in breaks the chain."""
    wb.forget(source="chat#2")
    wb.close()
    con = duckdb.connect(str(db))
    con.execute(
        "UPDATE events SET payload = json_object('by', 'source', 'events', [1, 2, 3, 4, 5, 6]) "
        "WHERE kind = 'forget'"
    )
    con.close()
    store = Store(db, read_only=True)
    report = verify(store, "maya")
    store.close()
    assert not report.ok and "changed after it was written" in report.problem


def test_cli_forget_dry_run_then_forget(wb: Workbench, db: Path, tmp_path: Path) -> None:
    wb.close()
    cmd = [sys.executable, "-m", "uac_kernel.cli.main", "forget", "--db", str(db), "--user", "maya"]
    dry = subprocess.run(
        [*cmd, "--text", SECRET, "--dry-run"], capture_output=True, text=True, timeout=120
    )
    assert dry.returncode == 0 and "would forget" in dry.stdout and SECRET in dry.stdout
    assert SECRET.encode() in raw(db)
    done = subprocess.run([*cmd, "--text", SECRET], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "forgot:" in done.stdout and "hash chains intact" in done.stdout
    assert SECRET.encode() not in raw(db)
    none = subprocess.run([*cmd, "--text", SECRET], capture_output=True, text=True, timeout=120)
    assert none.returncode == 0 and "nothing to forget" in none.stdout


def test_rerendered_checkpoints_equal_a_full_render_of_the_log_without_it(db: Path) -> None:
    """Forget re-renders incrementally; every version must still read exactly as a full render
    of the remaining log up to that version (the rules segment is kept as stored)."""
    from uac_kernel.checkpoints.codegen import RULES, join_segments, render_segments
    from uac_kernel.state.fold import State

    wb = Workbench(db, user="maya")
    for i in range(120):
        wb.ingest(
            [
                {
                    **fact(
                        f"2025-01-01T{i // 60:02d}:{i % 60:02d}:00",
                        "add",
                        "Trip" if i % 3 else "Allergy",
                        f"k{i}",
                        note=f"{SECRET} {i}" if i % 7 == 0 else f"plain {i}",
                    ),
                    "source": f"f{i}",
                }
            ]
        )
        if i % 9 == 0 and i > 1:
            wb.ingest([{**fact("2025-01-02T00:00:00", "update", "Trip", "k1", note=f"v{i}")}])
        if i % 10 == 9:
            wb.checkpoint()
    plan = wb.forget(text=SECRET)
    assert len(plan.records) == 18 and plan.checkpoints
    for cp in wb.checkpoints.all():
        state = State("maya")
        state.apply_all(wb.store.events("maya", upto_seq=cp.seq))
        expected = render_segments(state, None, ())
        rules = wb.store.con.execute(
            "SELECT arg_max(text, version) FROM checkpoint_segments "
            "WHERE user_id = 'maya' AND segment = ? AND version <= ?",
            [RULES, cp.version],
        ).fetchone()
        assert rules is not None
        expected[RULES] = rules[0]
        assert wb.code(cp.version) == join_segments(expected), cp.version
    wb.close()


RULE_SECRET = "Brindlewhistle"  # the text a notebook rule holds; nowhere else


def _cell(ip: Any, source: str) -> str:
    """Run a cell on the real shell, failing on any error; its printed output."""
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        result = ip.run_cell(source)
    result.raise_error()
    return cap.stdout


def test_a_notebook_rule_holding_the_text_is_taken_out_and_its_source_erased(
    kernel_shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "nb.duckdb"
    (tmp_path / "events.jsonl").write_text(
        json.dumps(fact("2025-03-01T09:00:00", "add", "Drug", "d1", name="aspirin")) + "\n"
    )
    ip = kernel_shell
    ip.reset(new_session=False)
    ip.config.pop("UacMagics", None)
    _cell(ip, "%load_ext uac")
    try:
        _cell(ip, f"%config UacMagics.db = {str(db)!r}")
        _cell(ip, "%config UacMagics.user = 'maya'")
        _cell(ip, "%uac open")
        _cell(ip, "%uac ingest events.jsonl")
        _cell(ip, "%uac checkpoint")
        ip.payload_manager.clear_payload()
        _cell(ip, "%uac edit rules")
        (payload,) = [
            p for p in ip.payload_manager.read_payload() if p["source"] == "set_next_input"
        ]
        rule_cell = payload["text"] + (
            "\n\n@rule(watch=['Drug'], severity='info', category='pharmacy')\n"
            "def flagged_drug(user):\n"
            "    for d in user.all('Drug'):\n"
            f"        if d.name == {RULE_SECRET!r}:\n"
            "            yield Finding(f'{d.name}: flagged', [d])\n"
        )
        out = _cell(ip, rule_cell)
        assert "rule flagged_drug: in force" in out and "checkpoint 2 taken" in out
        wb = ip.user_ns["wb"]
        assert RULE_SECRET in wb.code(2)

        out = _cell(ip, f"%uac forget --text {RULE_SECRET}")
        assert "rule(s) flagged_drug taken out of force, their source erased" in out
        assert "flagged_drug" not in wb.runner.rules
        _cell(ip, "%uac checkpoint")  # a later checkpoint does not render it again
        for version in (1, 2, 3):
            assert RULE_SECRET not in wb.code(version)
        assert "flagged_drug" not in wb.code(2)  # its source, its name in `rules = [...]`
        assert "erased by a forget" in wb.code(2)
    finally:
        _cell(ip, "%unload_ext uac")
    assert RULE_SECRET.encode() not in raw(db)
    cli = [sys.executable, "-m", "uac_kernel.cli.main"]
    for args in (["code", "--version", "2"], ["verify"]):
        done = subprocess.run([*cli, *args, "--db", str(db)], capture_output=True, text=True)
        assert done.returncode == 0 and RULE_SECRET not in done.stdout, done.stderr


def test_verify_fails_while_a_rules_segment_holds_a_rule_whose_source_was_forgotten(
    db: Path,
) -> None:
    from uac_kernel.rules.engine import Finding, rule

    wb = Workbench(db, user="maya")
    wb.ingest([fact("2025-03-01T09:00:00", "add", "Drug", "d1", name="aspirin")])
    source = (
        "@rule(watch=['Drug'])\n"
        "def flagged_drug(user):\n"
        f"    return [Finding('x', [d]) for d in user.all('Drug') if d.name == {RULE_SECRET!r}]\n"
    )
    namespace: dict[str, Any] = {"rule": rule, "Finding": Finding}
    # kept where inspect finds it, as the magics keep a cell's source
    linecache.cache["<rule-cell>"] = (len(source), None, source.splitlines(True), "<rule-cell>")
    exec(compile(source, "<rule-cell>", "exec"), namespace)
    wb.define_rule(namespace["flagged_drug"], source)
    wb.checkpoint()
    row = wb.store.con.execute(
        "SELECT text, salt, text_hash FROM checkpoint_segments WHERE segment = '3'"
    ).fetchone()
    wb.forget(text=RULE_SECRET)
    wb.close()
    assert verify(Store(db, read_only=True)).ok
    # the segment as it was before the forget, salt and hash and all: what a forget that kept
    # the rules segment as stored left
    con = duckdb.connect(str(db))
    con.execute(
        "UPDATE checkpoint_segments SET text = ?, salt = ?, text_hash = ? WHERE segment = '3'",
        list(row),
    )
    con.close()
    report = verify(Store(db, read_only=True))
    assert not report.ok and "still defines rule 'flagged_drug'" in report.summary(str(db))


def cell_rule(name: str, body: str) -> tuple[Any, str]:
    """A rule as a notebook cell defines it: its source kept where inspect finds it."""
    from uac_kernel.rules.engine import Finding, rule

    source = f"@rule(watch=['Drug'])\ndef {name}(user):\n{body}"
    filename = f"<cell-{hashlib.sha256(source.encode()).hexdigest()[:8]}>"
    namespace: dict[str, Any] = {"rule": rule, "Finding": Finding}
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name], source


def test_a_forgotten_rule_source_goes_by_name_only_from_checkpoints_that_read_it(
    db: Path,
) -> None:
    """The segment renders a rule as defined, not as logged: a rule whose logged source goes
    leaves every checkpoint whose latest definition of it was that source, and a later, clean
    definition of the same name stays where it is the latest."""
    wb = Workbench(db, user="maya")
    wb.ingest([fact("2025-03-01T09:00:00", "add", "Drug", "d1", name="aspirin")])
    first, _ = cell_rule("flagged", "    return []\n")
    wb.define_rule(first, f"def flagged(user):\n    # {RULE_SECRET}\n    return []\n")
    wb.checkpoint()
    second, source = cell_rule("flagged", "    return []  # redefined\n")
    wb.define_rule(second, source)
    wb.ingest([fact("2025-03-02T09:00:00", "add", "Drug", "d2", name="ibuprofen")])
    wb.checkpoint()
    plan = wb.forget(text=RULE_SECRET)
    assert [e.kind for e in plan.events] == ["rule"]
    segments = dict(
        wb.store.con.execute(
            "SELECT version, text FROM checkpoint_segments WHERE segment = '3' ORDER BY version"
        ).fetchall()
    )
    assert "def flagged" not in segments[1]
    assert "# redefined" in segments[2]
    assert wb.verify().ok
    wb.close()
    assert RULE_SECRET.encode() not in raw(db)


def test_a_file_owing_its_rewrite_fails_verify_until_a_writer_opens_it(tmp_path: Path) -> None:
    """A forget killed after its erasure committed, before it rewrote the file, leaves the
    store owing the rewrite (the row its transaction wrote): verify says so, and the next
    Store opened to write rewrites the file."""
    db = tmp_path / "s.duckdb"
    wb = Workbench(db, user="maya")
    wb.ingest(history())
    wb.forget(text=SECRET)
    wb.close()
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO uncompacted VALUES (current_timestamp)")  # as the kill leaves it
    con.close()
    store = Store(db, read_only=True)
    report = verify(store)
    store.close()
    assert not report.ok and "may still hold bytes a forget erased" in report.summary(str(db))
    Store(db).close()
    store = Store(db, read_only=True)
    assert not store.compaction_owed and verify(store).ok
    store.close()

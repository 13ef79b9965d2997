"""Model answers are proposals: bounded, and held for review when they would change much.

Each case runs the real ``openai`` client against the local chat-completions server and a real
DuckDB file. The memory: 3 records the conversation is about or near (a Lisbon trip, an Oslo
trip, a statin) and 20 books it never mentions; the batch: two turns about the Lisbon flight.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import uac, uac_here
from helpers.events import fact
from helpers.review import HISTORY, MOVE, TURNS, answer, extract_one, held_one, op

from uac_kernel.core.errors import EventError, ReviewError
from uac_kernel.model.client import ModelSettings, list_calls
from uac_kernel.model.extract import ExtractionLimits
from uac_kernel.model.testing import ChatServer
from uac_kernel.workbench import Workbench

RECORDS = len(HISTORY)  # 23 current records


WIPE = answer(*[op("retract", ev["type"], ev["key"], reason="never happened") for ev in HISTORY])


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


@pytest.fixture
def wb(tmp_path: Path, server: ChatServer) -> Iterator[Workbench]:
    settings = ModelSettings(model="stand-in", base_url=server.base_url, max_retries=0)
    with Workbench(tmp_path / "u.duckdb", user="maya", model=settings) as wb:
        wb.ingest(HISTORY)
        wb.ingest(TURNS)
        yield wb


def log_of(wb: Workbench) -> list[tuple[int, str]]:
    return [(e.seq, e.hash) for e in wb.store.events()]


def current(wb: Workbench) -> dict[str, dict[str, Any]]:
    return {f"{t} {r.key}": r.fields() for t in sorted(wb.state.types) for r in wb.state.all(t)}


# -- held -------------------------------------------------------------------------------------


def test_an_answer_retracting_every_record_is_held_and_nothing_changes(
    wb: Workbench, server: ChatServer
) -> None:
    before = current(wb)
    report = extract_one(wb, server, WIPE)
    assert (report.applied, report.held, report.pending, report.operations) == (0, 1, 0, 0)
    assert report.summary().endswith("; 1 held for review (see `uac review`)")
    assert current(wb) == before and len(before) == RECORDS
    assert wb.log(kinds=["fact"])[-1].payload["key"] == "book-t"  # the history's last fact
    (held,) = wb.log(kinds=["review"])
    call_id = list_calls(wb.store)[-1].call_id
    assert held.payload == {
        "state": "held",
        "call_id": call_id,
        "reason": "it retracts or overwrites 23 of 23 current records, more than the budget of 3 "
        "unreviewed changes between reviews; it changes 22 records its turns do not mention: Trip "
        "'trip-oslo', Medication 'med-statin', Book 'book-a', Book 'book-b', Book 'book-c' "
        "and 17 more",
        "utterances": ["chat-9#1", "chat-9#2"],
        "counts": {"add": 0, "update": 0, "retract": 23, "changed": 23, "unmentioned": 22},
    }
    # the answer is kept once, in the call record, not copied into the log
    (kept,) = wb.store.con.execute(
        "SELECT content FROM model_calls WHERE call_id = ?", [call_id]
    ).fetchone()
    assert kept == WIPE
    # the held turns are not sent again
    calls = len(server.requests)
    assert wb.extract(progress=False).batches == 0 and len(server.requests) == calls
    (batch,) = wb.review()
    assert batch.id == call_id and [c.op for c in batch.changes] == ["retract"] * RECORDS
    assert batch.text().splitlines()[1:3] == [
        "  1. - Trip 'trip-lisbon' RETRACTED (reason: 'never happened')",
        "  2. - Trip 'trip-oslo' RETRACTED (reason: 'never happened')",
    ]
    assert wb.verify().ok


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        pytest.param(
            answer(op("update", "Medication", "med-statin", active=False)),
            "it changes 1 record its turns do not mention: Medication 'med-statin'",
            id="update-unmentioned",
        ),
        pytest.param(
            answer(op("retract", "Book", "book-q")),
            "it changes 1 record its turns do not mention: Book 'book-q'",
            id="retract-unmentioned",
        ),
        pytest.param(
            answer(op("update", "Book", "book-q", pages=100)),  # a new field, still a change
            "it changes 1 record its turns do not mention: Book 'book-q'",
            id="new-field-on-unmentioned",
        ),
        pytest.param(
            answer(
                MOVE,
                op("update", "Trip", "trip-lisbon", destination="Porto"),
                op("add", "Trip", "trip-flight", destination="Lisbon"),
                op("retract", "Trip", "trip-flight"),
                *[op("update", "Book", f"book-{c}", title="x") for c in "ab"],
            ),
            "it changes 2 records its turns do not mention: Book 'book-a', Book 'book-b'",
            id="add-then-retract-in-one-answer-is-not-existing",
        ),
    ],
)
def test_a_change_to_a_record_the_turns_do_not_mention_is_held(
    wb: Workbench, server: ChatServer, reply: str, reason: str
) -> None:
    before, log = current(wb), log_of(wb)
    assert extract_one(wb, server, reply).held == 1
    assert current(wb) == before
    (held,) = wb.log(kinds=["review"])
    assert held.payload["reason"] == reason
    assert log_of(wb) == [*log, (held.seq, held.hash)]  # the hold, and nothing else


def test_overwriting_more_than_the_floor_of_mentioned_records_is_held(
    tmp_path: Path, server: ChatServer
) -> None:
    # Four trips the turn names, each overwritten: more than max(3, 10% of 4) = 3.
    settings = ModelSettings(model="stand-in", base_url=server.base_url, max_retries=0)
    with Workbench(tmp_path / "t.duckdb", user="maya", model=settings) as wb:
        towns = ["lisbon", "porto", "faro", "braga"]
        wb.ingest([fact("2025-01-01", "add", "Trip", f"trip-{t}", nights=2) for t in towns])
        turn = {**TURNS[0], "text": "Lisbon, Porto, Faro and Braga are all three nights now."}
        wb.ingest([turn])
        three = [op("update", "Trip", f"trip-{t}", nights=3) for t in towns]
        report = extract_one(wb, server, answer(*three))
        assert report.held == 1
        (held,) = wb.log(kinds=["review"])
        assert held.payload["reason"] == (
            "it retracts or overwrites 4 of 4 current records, more than the budget of 3 "
            "unreviewed changes between reviews"
        )
        # limits are the caller's: with a floor of 4 the same answer applies
        wb.reject(held.payload["call_id"])
        wb.ingest([{**turn, "source": "chat-10#1"}])
        server.enqueue(answer(*[{**o, "utterances": ["chat-10#1"]} for o in three]))
        report = wb.extract(progress=False, limits=ExtractionLimits(hold_floor=4))
        assert (report.applied, report.held) == (1, 0)
        assert {r.nights for r in wb.state.all("Trip")} == {3}


def test_small_changes_to_mentioned_records_apply(wb: Workbench, server: ChatServer) -> None:
    report = extract_one(wb, server, answer(MOVE, op("add", "Flight", "fl-1", day="2025-03-18")))
    assert (report.applied, report.held, report.operations) == (1, 0, 2)
    assert str(wb.state.get("Trip", "trip-lisbon").end) == "2025-03-18"  # type: ignore[union-attr]
    assert wb.log(kinds=["review"]) == [] and wb.review() == []


# -- refused: over a cap --------------------------------------------------------------------------


def flood(types: int, fields: int) -> str:
    ops = [op("add", f"T{i}", f"k{i}", **{f"f{j}": j for j in range(fields)}) for i in range(types)]
    return answer(*ops)


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        pytest.param(
            flood(3000, 20),
            "extraction of chat-9#1..chat-9#2: field 'operations': the answer has 3000 "
            "operations, more than the 100 one batch may have; return only the facts the turns "
            "state",
            id="3000-types-x-20-fields",
        ),
        pytest.param(
            answer(*[op("add", "Flight", f"fl-{i}", day="2025-03-18") for i in range(101)]),
            "extraction of chat-9#1..chat-9#2: field 'operations': the answer has 101 "
            "operations, more than the 100 one batch may have; return only the facts the turns "
            "state",
            id="101-operations",
        ),
        pytest.param(
            flood(11, 1),
            "extraction of chat-9#1..chat-9#2: field 'type': the answer makes 11 new record "
            "types, more than the 10 one batch may make; reuse the existing types",
            id="11-new-types",
        ),
        pytest.param(
            flood(1, 61),
            "extraction of chat-9#1..chat-9#2: field 'fields': the answer makes 61 new fields, "
            "more than the 60 one batch may make; reuse the existing fields",
            id="61-new-fields",
        ),
        pytest.param(
            answer(
                *[
                    op("update", "Book", f"book-{c}", **{f"g{c}{j}": 1 for j in range(4)})
                    for c in "abcdefghijklmnop"
                ]
            ),
            "extraction of chat-9#1..chat-9#2: field 'fields': the answer makes 64 new fields, "
            "more than the 60 one batch may make; reuse the existing fields",
            id="64-new-fields-on-existing-types",
        ),
    ],
)
def test_an_answer_over_a_cap_is_refused_before_any_append(
    wb: Workbench, server: ChatServer, reply: str, error: str
) -> None:
    log = log_of(wb)
    server.enqueue(reply, reply)  # the retry is over the cap too
    report = wb.extract(progress=False)
    assert (report.applied, report.held, report.pending) == (0, 0, 1)
    assert report.errors == [error]
    assert log_of(wb) == log and "T0" not in wb.state.types
    # the model was told why, without its whole answer sent back when that is large
    told = server.requests[-1]["messages"]
    assert told[-1]["content"] == f"That answer was rejected: {error}\nReturn corrected operations."
    assert len(told[-2]["content"]) <= 60_000
    assert [c.outcome for c in list_calls(wb.store)] == ["ok", "rejected", "ok", "rejected"]


def test_caps_are_configurable(wb: Workbench, server: ChatServer) -> None:
    two = answer(MOVE, op("add", "Flight", "fl-1", day="2025-03-18"))
    server.enqueue(two, two)
    report = wb.extract(progress=False, limits=ExtractionLimits(max_operations=1))
    assert (
        report.pending == 1 and "the answer has 2 operations, more than the 1" in report.errors[0]
    )
    assert extract_one(wb, server, two, limits=ExtractionLimits(max_new_types=1)).applied == 1


# -- deciding ---------------------------------------------------------------------------------


def test_review_shows_each_operation_before_and_after(wb: Workbench, server: ChatServer) -> None:
    batch_id = held_one(wb, server)
    (batch,) = wb.review()
    assert batch.text().splitlines() == [
        f"held batch {batch_id} (4 operations on chat-9#1..chat-9#2, held "
        f"{batch.held_at:%Y-%m-%d %H:%M}): it changes 2 records its turns do not mention: "
        "Medication 'med-statin', Trip 'trip-oslo'",
        "  1. ~ Trip 'trip-lisbon': 1 field changed",
        "       end: '2025-03-16' → '2025-03-18'",
        "  2. ~ Medication 'med-statin': 1 field changed",
        "       active: True → False",
        "  3. + Flight 'fl-1' (new): day='2025-03-18'",
        "  4. - Trip 'trip-oslo' RETRACTED (reason: 'cancelled')",
    ]


def test_accept_applies_every_operation_and_logs_the_decision(
    wb: Workbench, server: ChatServer
) -> None:
    batch_id = held_one(wb, server)
    checkpoints = len(wb.checkpoints.all())
    report = wb.accept(batch_id)
    # 4 facts, the extraction marker and the decision; the new type and its field besides
    assert (report.appended, report.schema_changes) == (6, 2)
    assert wb.state.get("Trip", "trip-oslo") is None
    assert wb.state.get("Medication", "med-statin").active is False  # type: ignore[union-attr]
    *_, marker, decision = wb.log()
    assert marker.kind == "extraction" and marker.payload == {
        "utterances": ["chat-9#1", "chat-9#2"],
        "operations": 4,
        "call_id": batch_id,
    }
    assert decision.kind == "review" and decision.payload == {
        "state": "accepted",
        "call_id": batch_id,
        "utterances": ["chat-9#1", "chat-9#2"],
        "operations": [1, 2, 3, 4],
    }
    # facts point back at their turns; the batch is decided; a checkpoint holds the result
    assert all(e.payload["derived_from"] == ["chat-9#1"] for e in wb.log(kinds=["fact"])[-4:])
    assert wb.review() == [] and len(wb.checkpoints.all()) == checkpoints + 1
    with pytest.raises(
        ReviewError,
        match=f"^no batch {batch_id} is held for review of user 'maya' \\(held: none\\)",
    ):
        wb.accept(batch_id)
    assert wb.extract(progress=False).batches == 0
    assert wb.verify().ok


def test_accept_some_applies_only_those(wb: Workbench, server: ChatServer) -> None:
    batch_id = held_one(wb, server)
    wb.accept(batch_id, only=[1, 3])
    assert str(wb.state.get("Trip", "trip-lisbon").end) == "2025-03-18"  # type: ignore[union-attr]
    assert wb.state.get("Flight", "fl-1") is not None
    assert wb.state.get("Trip", "trip-oslo") is not None  # 4 not taken
    assert wb.state.get("Medication", "med-statin").active is True  # type: ignore[union-attr]
    facts = wb.log(kinds=["fact"])[-2:]
    assert [e.source.rsplit(":", 1)[1] for e in facts] == ["1", "3"]  # type: ignore[union-attr]
    assert wb.log(kinds=["review"])[-1].payload["operations"] == [1, 3]
    assert wb.log(kinds=["extraction"])[-1].payload["operations"] == 2


def test_reject_applies_nothing_and_the_turns_are_no_longer_pending(
    wb: Workbench, server: ChatServer
) -> None:
    batch_id = held_one(wb, server)
    before, facts = current(wb), len(wb.log(kinds=["fact"]))
    wb.reject(batch_id)
    assert current(wb) == before and len(wb.log(kinds=["fact"])) == facts
    assert wb.log(kinds=["review"])[-1].payload == {
        "state": "rejected",
        "call_id": batch_id,
        "utterances": ["chat-9#1", "chat-9#2"],
    }
    assert wb.review() == [] and wb.extract(progress=False).batches == 0
    # nothing is lost: the call record still holds the rejected answer
    (content,) = wb.store.con.execute(
        "SELECT content FROM model_calls WHERE call_id = ?", [batch_id]
    ).fetchone()
    assert json.loads(content)["operations"][3]["key"] == "trip-oslo"


def test_accept_revalidates_against_the_state_now(wb: Workbench, server: ChatServer) -> None:
    batch_id = held_one(wb, server)
    wb.ingest([fact("2025-03-02", "retract", "Trip", "trip-oslo", reason="gone")])
    log = log_of(wb)
    with pytest.raises(
        EventError, match=r"^held batch \d+:4: field 'key': Trip 'trip-oslo' was retracted"
    ):
        wb.accept(batch_id)
    assert log_of(wb) == log and len(wb.review()) == 1  # nothing appended, still held
    wb.accept(batch_id, only=[1, 2, 3])  # the operations that still fit
    assert wb.review() == []


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(
            lambda wb, b: wb.accept(b, only=[5]),
            "held batch {b} has no operation 5 (it has 1 to 4); `uac review` numbers them",
            id="no-such-operation",
        ),
        pytest.param(
            lambda wb, b: wb.accept(b, only=[]),
            "no operations chosen from held batch {b}; to apply none, reject it with "
            "`uac review reject {b}`",
            id="nothing-chosen",
        ),
        pytest.param(
            lambda wb, b: wb.accept(b + 100),
            "no batch {b100} is held for review of user 'maya' (held: {b}); `uac review` lists them",
            id="no-such-batch",
        ),
        pytest.param(
            lambda wb, b: wb.reject(b + 100),
            "no batch {b100} is held for review of user 'maya' (held: {b}); `uac review` lists them",
            id="reject-no-such-batch",
        ),
    ],
)
def test_a_decision_that_cannot_be_made_is_one_line(
    wb: Workbench, server: ChatServer, call: Any, message: str
) -> None:
    batch_id = held_one(wb, server)
    log = log_of(wb)
    with pytest.raises(ReviewError) as info:
        call(wb, batch_id)
    assert str(info.value) == message.format(b=batch_id, b100=batch_id + 100)
    assert log_of(wb) == log


def test_hostile_strings_in_a_held_answer_are_shown_escaped(
    wb: Workbench, server: ChatServer
) -> None:
    evil = "\x1b[2J\x1b[31mrm -rf /\x07"
    wb.ingest([{**TURNS[0], "source": "chat\x1b[31m#1"}])
    reply = answer(op("retract", "Book", "book-a", reason=evil), op("add", "Note", "n1", text=evil))
    assert extract_one(wb, server, reply).held == 1
    (batch,) = wb.review()
    text = batch.text()
    assert "\x1b" not in text and "\x07" not in text
    assert "RETRACTED (reason: '\\x1b[2J\\x1b[31mrm -rf /\\x07')" in text
    assert "on chat-9#1..chat\\x1b[31m#1" in text


def test_review_via_cli(tmp_path: Path, server: ChatServer) -> None:
    from helpers.cli import uac

    db = tmp_path / "u.duckdb"
    settings = ModelSettings(model="stand-in", base_url=server.base_url, max_retries=0)
    with Workbench(db, user="maya", model=settings) as wb:
        wb.ingest(HISTORY)
        wb.ingest(TURNS)
        batch_id = held_one(wb, server)
    env = {"UAC_DB": str(db), "UAC_USER": "maya"}
    listed = uac("review", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].startswith(f"held batch {batch_id} (4 operations")
    assert "  4. - Trip 'trip-oslo' RETRACTED (reason: 'cancelled')" in listed.stdout
    bad = uac("review", "accept", str(batch_id), "--only", "1,x", cwd=tmp_path, env=env)
    assert (bad.returncode, bad.stderr) == (
        1,
        "uac: error: --only takes operation numbers from 1 separated by commas, like 1,3; "
        "not '1,x'\n",
    )
    missing = uac("review", "accept", cwd=tmp_path, env=env)
    assert missing.stderr == (
        "uac: error: uac review accept needs the ID of a held batch; `uac review` lists them\n"
    )
    took = uac("review", "accept", str(batch_id), "--only", "1,3", cwd=tmp_path, env=env)
    assert took.returncode == 0, took.stderr
    assert took.stdout.startswith(f"batch {batch_id}: accepted operations 1,3; ")
    assert uac("review", cwd=tmp_path, env=env).stdout == "no model answers are held for review\n"
    helped = uac("review", "--help", cwd=tmp_path, env=env).stdout
    assert "is held, not applied" in " ".join(helped.split())


# -- the budget holds across runs; a mention is a real reference (through `uac extract`) -------


def titled_books(key: str, title: str, n: int = 20) -> list[dict[str, Any]]:
    """``n`` books keyed and titled by their number: ``key.format(i)``, ``title.format(i)``."""
    return [
        fact("2025-01-13", "add", "Book", key.format(i), title=title.format(i))
        for i in range(1, n + 1)
    ]


class Runs:
    """A store driven as a user drives it: each run ingests one turn, then `uac extract`
    asks the local server, which answers with the ops given. Each command opens the store
    anew, through ``main`` in this process, or as a process of its own with ``processes``."""

    def __init__(
        self,
        tmp_path: Path,
        server: ChatServer,
        history: list[dict[str, Any]],
        *,
        processes: bool = False,
    ):
        self.run = uac if processes else uac_here
        self.cwd, self.server = tmp_path, server
        self.db = tmp_path / "runs.duckdb"
        self.env = {
            "UAC_DB": str(self.db),
            "UAC_USER": "maya",
            "UAC_MODEL": "stand-in",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "",
        }
        self.turns = 0
        with Workbench(self.db, user="maya") as wb:
            wb.ingest(history)

    def extract(self, text: str, *ops: dict[str, Any]) -> str:
        """One run: the turn ``text``, an answer of ``ops`` citing it; `uac extract`'s stdout."""
        self.turns += 1
        source = f"chat-run#{self.turns}"
        with Workbench(self.db, user="maya") as wb:
            wb.ingest([{**TURNS[0], "text": text, "source": source}])
        self.server.enqueue(answer(*[{**o, "utterances": [source]} for o in ops]))
        done = self.run("extract", cwd=self.cwd, env=self.env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def uac(self, *args: str) -> str:
        done = self.run(*args, cwd=self.cwd, env=self.env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def books(self) -> dict[str, str]:
        with Workbench(self.db, user="maya", read_only=True) as wb:
            return {r.key: r.title for r in wb.state.all("Book")}

    def holds(self) -> list[str]:
        with Workbench(self.db, user="maya", read_only=True) as wb:
            return [e.payload["reason"] for e in wb.log(kinds=["review"])]


def test_numbers_the_turns_say_do_not_mention_books_titled_by_number(
    tmp_path: Path, server: ChatServer
) -> None:
    # The attack: turns like "I slept 3 and 4 hours" let an answer retract Book 'book3' and
    # 'book4' (titles "Title 3", "Title 4"), three a run: 20 of 20 books in 7 runs.
    runs = Runs(tmp_path, server, titled_books("book{}", "Title {}"))
    for run in range(7):
        numbers = [n for n in range(3 * run + 1, 3 * run + 4) if n <= 20]
        said = f"I slept {', '.join(map(str, numbers))} hours"
        out = runs.extract(said, *[op("retract", "Book", f"book{n}") for n in numbers])
        assert "1 held for review" in out
    assert len(runs.books()) == 20
    holds = runs.holds()
    assert len(holds) == 7 and holds[0] == (
        "it changes 3 records its turns do not mention: Book 'book1', Book 'book2', Book 'book3'"
    )


def test_a_word_every_title_shares_mentions_no_book(tmp_path: Path, server: ChatServer) -> None:
    # The attack: the word "Title" let three overwrites a run through, 20 of 20 in 8 runs.
    runs = Runs(tmp_path, server, titled_books("book{}", "Title {}"))
    for run in range(8):
        numbers = [(3 * run + i) % 20 + 1 for i in range(3)]
        ops = [op("update", "Book", f"book{n}", title="pwned") for n in numbers]
        assert "1 held for review" in runs.extract("What a title that was!", *ops)
    assert set(runs.books().values()) == {f"Title {n}" for n in range(1, 21)}
    assert len(runs.holds()) == 8


def test_a_number_inside_a_key_is_not_a_mention(tmp_path: Path, server: ChatServer) -> None:
    runs = Runs(tmp_path, server, titled_books("vol-{}", "{}-th volume of the saga", n=5))
    out = runs.extract("I slept 3 hours", op("retract", "Book", "vol-3"))
    assert "1 held for review" in out and len(runs.books()) == 5
    assert runs.holds() == ["it changes 1 record its turns do not mention: Book 'vol-3'"]


def test_the_type_name_said_mentions_no_record_of_the_type(
    tmp_path: Path, server: ChatServer
) -> None:
    names = ["Dune", "Emma", "Ulysses", "Beloved", "Middlemarch"]
    books = [
        fact("2025-01-13", "add", "Book", f"book-{c}", title=t)
        for c, t in zip("abcde", names, strict=True)
    ]
    runs = Runs(tmp_path, server, books)
    out = runs.extract("I read a book today", op("retract", "Book", "book-a"))
    assert "1 held for review" in out and len(runs.books()) == 5


def real_books() -> list[dict[str, Any]]:
    """20 books the turns can name: each title is its own word."""
    words = [
        "amber",
        "birch",
        "cedar",
        "delta",
        "ember",
        "fjord",
        "grove",
        "heron",
        "iris",
        "juniper",
    ]
    words += [
        "kestrel",
        "lotus",
        "maple",
        "nectar",
        "orchid",
        "pebble",
        "quartz",
        "raven",
        "sorrel",
        "tundra",
    ]
    return [fact("2025-01-13", "add", "Book", f"book-{w}", title=w.title()) for w in words]


def test_the_budget_of_unreviewed_changes_holds_across_runs_and_processes(
    tmp_path: Path, server: ChatServer
) -> None:
    # Changes the turns do mention, two a run, each run its own `uac extract` process: the
    # budget, max(3, 10% of 20) = 3, is spent across them, not renewed by each.
    runs = Runs(tmp_path, server, real_books(), processes=True)
    ended = [op("retract", "Book", f"book-{w}") for w in ("amber", "birch")]
    assert "1 applied" in runs.extract("I gave away Amber and Birch", *ended)
    ended = [op("retract", "Book", f"book-{w}") for w in ("cedar", "delta")]
    assert "1 held for review" in runs.extract("I gave away Cedar and Delta", *ended)
    assert runs.holds() == [
        "it retracts or overwrites 2 of 18 current records, and answers applied since the last "
        "review already changed 2 without review: more than the budget of 3 unreviewed changes "
        "between reviews"
    ]
    assert "book-cedar" in runs.books() and "book-amber" not in runs.books()


def test_a_review_renews_the_budget(tmp_path: Path, server: ChatServer) -> None:
    runs = Runs(tmp_path, server, real_books())
    ended = [op("retract", "Book", f"book-{w}") for w in ("amber", "birch", "cedar")]
    assert "1 applied" in runs.extract("I gave away Amber, Birch and Cedar", *ended)
    ended = [op("retract", "Book", "book-delta")]
    assert "1 held for review" in runs.extract("I gave away Delta", *ended)
    (listed,) = [line for line in runs.uac("review").splitlines() if line.startswith("held")]
    runs.uac("review", "reject", listed.split()[2])
    # a person has looked: the next changes start a new budget
    ended = [op("retract", "Book", f"book-{w}") for w in ("ember", "fjord", "grove")]
    assert "1 applied" in runs.extract("I gave away Ember, Fjord and Grove", *ended)
    assert "1 held for review" in runs.extract(
        "I gave away Heron", op("retract", "Book", "book-heron")
    )
    assert len(runs.books()) == 20 - 6

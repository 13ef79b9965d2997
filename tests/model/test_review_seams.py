"""Outside attacks on review (issue 25 part 4): a hostile model endpoint tries to walk around the
hold — the budget of unreviewed change and what counts as a mention — across runs, users,
processes, reviews, forgets and what-ifs.

Every case drives real parts: a real DuckDB file in ``tmp_path``, `uac` commands (through its
``main``; processes where a race needs them), the real ``openai`` client against the local chat-completions server (``ChatServer``). Each asserts the
safe behaviour: what SHOULD happen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import uac_here as run_uac  # in process: see helpers.cli
from helpers.events import fact

from uac_kernel.model.testing import ChatServer, Reply
from uac_kernel.workbench import Workbench

# -- harness -----------------------------------------------------------------------------------

WORDS = [
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


def books(words: list[str] = WORDS, **extra: Any) -> list[dict[str, Any]]:
    return [fact("2025-01-13", "add", "Book", f"book-{w}", title=w.title(), **extra) for w in words]


def op(op: str, type_: str, key: str, reason: str | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "op": op,
        "type": type_,
        "key": key,
        "fields": [{"name": k, "value": v} for k, v in fields.items()],
        **({"reason": reason} if reason else {}),
        "utterances": [],
    }


def answer(ops: list[dict[str, Any]], cite: str, constraints: Any = ()) -> str:
    return json.dumps(
        {
            "operations": [{**o, "utterances": [cite]} for o in ops],
            "constraints": [{**c, "utterances": [cite]} for c in constraints],
        }
    )


class Runs:
    """A store driven as a user drives it: each run ingests turns, then `uac extract`
    asks the local (hostile) server, which answers with the ops given."""

    def __init__(
        self,
        tmp_path: Path,
        server: ChatServer,
        history: list[dict[str, Any]],
        user: str = "maya",
        db: Path | None = None,
    ):
        self.cwd, self.server, self.user = tmp_path, server, user
        self.db = db or tmp_path / "runs.duckdb"
        self.env = {
            "UAC_DB": str(self.db),
            "UAC_USER": user,
            "UAC_MODEL": "stand-in",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "",
        }
        self.turns = 0
        if history:
            with Workbench(self.db, user=user) as wb:
                wb.ingest(history)

    def say(self, *turns: tuple[str, str], source: str | None = None) -> list[str]:
        """Ingest turns (speaker, text); their sources."""
        sources = []
        events = []
        for speaker, text in turns:
            self.turns += 1
            src = source if source and len(turns) == 1 else f"chat-{self.user}#{self.turns}"
            sources.append(src)
            events.append(
                {
                    "kind": "utterance",
                    "ts": f"2025-03-01T09:{self.turns // 60:02d}:{self.turns % 60:02d}",
                    "speaker": speaker,
                    "text": text,
                    "source": src,
                }
            )
        with Workbench(self.db, user=self.user) as wb:
            wb.ingest(events)
        return sources

    def extract(
        self,
        text: str | list[tuple[str, str]],
        *ops: dict[str, Any],
        constraints: Any = (),
        source: str | None = None,
        cite: int = 0,
    ) -> str:
        """One run: the turn(s), an answer of ``ops`` citing turn ``cite``; `uac extract`'s
        stdout."""
        turns = [("user", text)] if isinstance(text, str) else text
        sources = self.say(*turns, source=source)
        self.server.enqueue(answer(list(ops), sources[cite], constraints))
        return self.uac("extract")

    def uac(self, *args: str) -> str:
        done = run_uac(*args, cwd=self.cwd, env=self.env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def reject_all(self) -> None:
        for line in self.uac("review").splitlines():
            if line.startswith("held batch "):
                self.uac("review", "reject", line.split()[2])

    def state(self) -> dict[str, dict[str, Any]]:
        with Workbench(self.db, user=self.user, read_only=True) as wb:
            return {f"{t} {r.key}": r.fields() for t in wb.state.types for r in wb.state.all(t)}

    def books(self) -> dict[str, dict[str, Any]]:
        """Current books, by key, with the fields they hold (a field the type gained later,
        ``None`` on a book, left out)."""
        return {
            k[5:]: {f: x for f, x in v.items() if x is not None}
            for k, v in self.state().items()
            if k.startswith("Book ")
        }

    def holds(self) -> list[str]:
        with Workbench(self.db, user=self.user, read_only=True) as wb:
            return [
                e.payload["reason"]
                for e in wb.log(kinds=["review"])
                if e.payload.get("state") == "held"
            ]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


def gone(*words: str) -> list[dict[str, Any]]:
    return [op("retract", "Book", f"book-{w}", reason="gave it away") for w in words]


# -- what is a mention: false mentions a hostile answer could ride on ---------------------------


def test_a_number_with_a_unit_is_not_a_mention(tmp_path: Path, server: ChatServer) -> None:
    # "20mg" is a number, as "3" is: saying a dose of another drug names no medication.
    meds = [
        fact("2025-01-10", "add", "Medication", "med-statin", name="atorvastatin", dose="20mg"),
        fact("2025-01-10", "add", "Medication", "med-met", name="metformin", dose="500mg"),
        fact("2025-01-10", "add", "Medication", "med-vitd", name="cholecalciferol", dose="1000iu"),
    ]
    runs = Runs(tmp_path, server, meds)
    out = runs.extract(
        "I took 20mg of ibuprofen for my headache",
        op("retract", "Medication", "med-statin", reason="stopped"),
    )
    assert "1 held for review" in out
    assert "Medication med-statin" in runs.state()


def test_a_common_word_of_a_notes_text_is_not_a_mention(tmp_path: Path, server: ChatServer) -> None:
    # A type with few records makes every word of a free-text value "distinctive": "morning"
    # is held by one Note, so "Good morning!" would name it.
    notes = [
        fact("2025-01-10", "add", "Note", "note-1", text="Water the plants every morning"),
        fact("2025-01-10", "add", "Note", "note-2", text="Call the bank about the mortgage"),
        fact("2025-01-10", "add", "Note", "note-3", text="Pick up dry cleaning on Friday"),
    ]
    runs = Runs(tmp_path, server, notes)
    out = runs.extract("Good morning! How are you?", op("retract", "Note", "note-1"))
    assert "1 held for review" in out
    assert "Note note-1" in runs.state()


def test_a_record_type_word_in_a_constraint_title_is_not_a_mention(
    tmp_path: Path, server: ChatServer
) -> None:
    # "trip" is every Trip's word, yet in a constraint's title it names the constraint: a turn
    # about booking a trip lets a hostile answer end the passport rule.
    history: list[dict[str, Any]] = [
        fact("2025-01-10", "add", "Trip", "trip-lisbon", destination="Lisbon", end="2025-03-16"),
        {
            "kind": "constraint",
            "ts": "2025-01-13T09:00:00",
            "op": "add",
            "key": "passport-valid",
            "constraint": {
                "kind": "valid_on",
                "title": "Passport valid for every trip",
                "document": {"type": "Passport"},
                "each": {"type": "Trip"},
                "at": {"fields": ["end"]},
            },
        },
    ]
    runs = Runs(tmp_path, server, history)
    out = runs.extract(
        "We booked a trip to Rome",
        constraints=[{"op": "retract", "key": "passport-valid", "reason": "no longer needed"}],
    )
    assert "1 held for review" in out
    assert "passport-valid" in runs.uac("constraints")


def test_an_assistant_turn_naming_records_is_not_a_mention(
    tmp_path: Path, server: ChatServer
) -> None:
    # The prompt itself says assistant turns are context, not facts; the assistant (a model)
    # naming records must not let a model answer change them.
    runs = Runs(tmp_path, server, books())
    out = runs.extract(
        [("user", "Tidying up today."), ("assistant", "Nice! Amber is on your shelf.")],
        *gone("amber"),
    )
    assert "1 held for review" in out
    assert "book-amber" in runs.books()


@pytest.mark.parametrize(
    "said",
    [
        pytest.param("I gave away \u0410mber", id="cyrillic-A-homoglyph"),
        pytest.param("I gave away Am\u200bber", id="zero-width-space-inside"),
        pytest.param("I gave away Amberley", id="longer-word-holding-the-key-word"),
        pytest.param("I gave away Amb", id="prefix-of-the-key-word"),
        pytest.param("I gave away book", id="the-type-name"),
        pytest.param("I gave away 1 2 3", id="numbers"),
    ],
)
def test_spellings_that_are_not_the_records_word_do_not_mention_it(
    tmp_path: Path, server: ChatServer, said: str
) -> None:
    runs = Runs(tmp_path, server, books())
    assert "1 held for review" in runs.extract(said, *gone("amber"))
    assert "book-amber" in runs.books()


def test_a_record_with_only_short_or_numeric_values_is_never_mentioned(
    tmp_path: Path, server: ChatServer
) -> None:
    history = [
        fact("2025-01-10", "add", "Reading", "r1", value=42, unit="kg"),
        fact("2025-01-10", "add", "Reading", "b3", value=7, unit="km"),
    ]
    runs = Runs(tmp_path, server, history)
    out = runs.extract("r1 b3 42 7 kg km", op("retract", "Reading", "r1"))
    assert "1 held for review" in out and "Reading r1" in runs.state()


@pytest.mark.parametrize(
    ("name", "said"),
    [
        pytest.param("Weiß", "Mrs WEISS moved to Graz", id="case-folded-sharp-s"),
        pytest.param("Müller", "Mrs Mu\u0308ller moved to Graz", id="decomposed-umlaut-NFD"),
        pytest.param("Lisbon", "Mrs ＬＩＳＢＯＮ moved to Graz", id="fullwidth-latin"),
    ],
)
def test_a_real_mention_in_another_normal_form_counts(
    tmp_path: Path, server: ChatServer, name: str, said: str
) -> None:
    # docs/models.md: "Words are compared case-folded"; forget matches NFKC + casefold. A user who
    # types NFD (macOS) or fullwidth really names the record: the small update applies.
    history = [
        fact("2025-01-10", "add", "Person", "p-1", name=name, city="Vienna"),
        fact("2025-01-10", "add", "Person", "p-2", name="Zoltan", city="Pest"),
    ]
    runs = Runs(tmp_path, server, history)
    out = runs.extract(said, op("update", "Person", "p-1", city="Graz"))
    assert "1 applied" in out, out
    assert runs.state()["Person p-1"]["city"] == "Graz"


# -- the budget: many runs, many ways to spend it ------------------------------------------------


def test_retractions_one_a_run_stop_at_the_budget(tmp_path: Path, server: ChatServer) -> None:
    runs = Runs(tmp_path, server, books())
    outs = [runs.extract(f"I gave away {w.title()}", *gone(w)) for w in WORDS[:8]]
    assert [("1 applied" in o) for o in outs] == [True] * 3 + [False] * 5
    assert len(runs.books()) == 20 - 3


def test_a_turn_naming_every_key_does_not_let_every_retraction_through(
    tmp_path: Path, server: ChatServer
) -> None:
    # 500 books, one turn names all 500: at most max(3, 10% of 500) = 50 may go without review,
    # however the answers split them.
    names = ["x" + "".join(chr(97 + (i // 26**k) % 26) for k in range(3)) for i in range(500)]
    runs = Runs(tmp_path, server, books(names))
    said = "My whole shelf: " + ", ".join(n.title() for n in names)
    taken = 0
    for start in range(0, 200, 40):
        runs.extract(said, *gone(*names[start : start + 40]))
        taken = 500 - len(runs.books())
    assert taken <= 50
    assert len(runs.holds()) >= 1


def test_a_batch_split_over_many_batches_of_one_run_shares_the_budget(
    tmp_path: Path, server: ChatServer
) -> None:
    runs = Runs(tmp_path, server, books())
    sources = runs.say(*[("user", f"I gave away {w.title()}") for w in WORDS[:5]])
    for w, s in zip(WORDS[:5], sources, strict=True):
        runs.server.enqueue(answer(gone(w), s))
    out = runs.uac("extract", "--batch-size", "1")
    assert "3 applied" in out and "2 held for review" in out, out
    assert len(runs.books()) == 17


def test_upserts_adding_new_records_do_not_widen_the_budget_of_their_run(
    tmp_path: Path, server: ChatServer
) -> None:
    runs = Runs(tmp_path, server, books())
    said = "I gave away Amber, Birch, Cedar and Delta; I bought Zephyr"
    out = runs.extract(
        said,
        op("add", "Book", "book-zephyr", title="Zephyr"),
        *gone("amber", "birch", "cedar", "delta"),
    )
    assert "1 held for review" in out and len(runs.books()) == 20


def test_the_models_own_unreviewed_adds_do_not_widen_the_next_budget(
    tmp_path: Path, server: ChatServer
) -> None:
    # Adds are free and never held: 200 junk records the model made, then one held answer the
    # user rejects, and the "fresh" budget is 10% of 220 = 22 — enough to retract all 20 books
    # the user really has, in one answer.
    runs = Runs(tmp_path, server, books())
    for run in range(2):
        junk = [op("add", "Note", f"n{run}-{i}", text=f"note {run} {i}") for i in range(100)]
        assert "1 applied" in runs.extract("I started a reading log", *junk)
    assert "1 held for review" in runs.extract("hello", *gone("tundra"))
    runs.reject_all()
    said = "My shelf: " + ", ".join(w.title() for w in WORDS)
    out = runs.extract(said, *gone(*WORDS))
    assert "1 held for review" in out
    assert len(runs.books()) == 20


CHANGE_STYLES: dict[str, Callable[[str], dict[str, Any]]] = {
    "retract": lambda w: op("retract", "Book", f"book-{w}"),
    "overwrite": lambda w: op("update", "Book", f"book-{w}", title="pwned"),
    "same-title-other-author": lambda w: op(
        "update", "Book", f"book-{w}", title=w.title(), author="nobody"
    ),
    "rename-field": lambda w: op("update", "Book", f"book-{w}", title=None, name=w.title()),
    "clear-field": lambda w: op("update", "Book", f"book-{w}", author=None),
    "new-field-marks-it-lost": lambda w: op("update", "Book", f"book-{w}", lost=True),
}


@pytest.mark.parametrize("style", list(CHANGE_STYLES))
def test_every_kind_of_change_spends_the_budget(
    tmp_path: Path, server: ChatServer, style: str
) -> None:
    runs = Runs(tmp_path, server, books(author="someone"))
    before = runs.books()
    outs = [
        runs.extract(f"Something about {w.title()}", CHANGE_STYLES[style](w)) for w in WORDS[:5]
    ]
    assert "1 applied" in outs[0], outs[0]
    changed = [w for w in WORDS[:5] if runs.books().get(f"book-{w}") != before[f"book-{w}"]]
    assert len(changed) <= 3, (changed, outs)


def test_constraint_changes_spend_the_same_budget(tmp_path: Path, server: ChatServer) -> None:
    def rule(key: str, title: str) -> dict[str, Any]:
        return {
            "kind": "constraint",
            "ts": "2025-01-13T09:00:00",
            "op": "add",
            "key": key,
            "constraint": {
                "kind": "valid_on",
                "title": title,
                "document": {"type": "Passport"},
                "each": {"type": "Trip"},
                "at": {"fields": ["end"]},
            },
        }

    towns = ["lisbon", "porto", "faro", "braga", "evora"]
    runs = Runs(tmp_path, server, [rule(f"rule-{t}", f"Passport for {t.title()}") for t in towns])
    for t in towns:
        runs.extract(
            f"The {t.title()} rule can go",
            constraints=[{"op": "retract", "key": f"rule-{t}", "reason": "done"}],
        )
    kept = runs.uac("constraints")
    assert sum(f"rule-{t}" in kept for t in towns) >= 2


def test_a_pending_hold_does_not_renew_the_budget(tmp_path: Path, server: ChatServer) -> None:
    runs = Runs(tmp_path, server, books())
    assert "1 applied" in runs.extract("I gave away Amber and Birch", *gone("amber", "birch"))
    assert "1 held for review" in runs.extract("hello", *gone("tundra"))  # not mentioned
    assert "1 held for review" in runs.extract(
        "I gave away Cedar and Delta", *gone("cedar", "delta")
    )
    assert len(runs.books()) == 18


@pytest.mark.parametrize("forgotten", ["Amber", "chat-9"])
def test_forget_in_between_does_not_refund_the_budget(
    tmp_path: Path, server: ChatServer, forgotten: str
) -> None:
    # The changes happened without review; forgetting their content (a word, or the
    # conversation by its id) is not a review, and must not hand the model a fresh budget.
    runs = Runs(tmp_path, server, books())
    out = runs.extract(
        "I gave away Amber, Birch and Cedar", *gone("amber", "birch", "cedar"), source="chat-9#1"
    )
    assert "1 applied" in out
    runs.uac("forget", "--text", forgotten)
    out = runs.extract("I gave away Delta", *gone("delta"), source="chat-10#1")
    assert "1 held for review" in out, out
    assert "book-delta" in runs.books()


def test_a_whatif_in_between_does_not_renew_the_budget(tmp_path: Path, server: ChatServer) -> None:
    runs = Runs(tmp_path, server, books())
    assert "1 applied" in runs.extract("I gave away Amber and Birch", *gone("amber", "birch"))
    what = tmp_path / "w.jsonl"
    what.write_text(json.dumps(fact("2025-03-05", "retract", "Book", "book-cedar")) + "\n")
    runs.uac("whatif", str(what))
    assert "1 held for review" in runs.extract(
        "I gave away Cedar and Delta", *gone("cedar", "delta")
    )
    assert len(runs.books()) == 18


def test_another_users_review_does_not_renew_this_users_budget(
    tmp_path: Path, server: ChatServer
) -> None:
    maya = Runs(tmp_path, server, books())
    bob = Runs(tmp_path, server, books(), user="bob", db=maya.db)
    assert "1 applied" in maya.extract("I gave away Amber and Birch", *gone("amber", "birch"))
    assert "1 held for review" in bob.extract("hello", *gone("tundra"))
    bob.reject_all()
    assert "1 held for review" in maya.extract(
        "I gave away Cedar and Delta", *gone("cedar", "delta")
    )
    assert len(maya.books()) == 18 and len(bob.books()) == 20


def test_a_user_named_like_another_does_not_share_or_reset_the_budget(
    tmp_path: Path, server: ChatServer
) -> None:
    # user ids differing in case or by a trailing space are different users
    maya = Runs(tmp_path, server, books())
    twin = Runs(tmp_path, server, books(), user="Maya", db=maya.db)
    assert "1 applied" in maya.extract("I gave away Amber and Birch", *gone("amber", "birch"))
    assert "1 applied" in twin.extract("I gave away Amber and Birch", *gone("amber", "birch"))
    assert "1 held for review" in twin.extract("hello", *gone("tundra"))
    twin.reject_all()
    assert "1 held for review" in maya.extract(
        "I gave away Cedar and Delta", *gone("cedar", "delta")
    )


def test_two_extract_processes_at_once_share_one_budget(tmp_path: Path, server: ChatServer) -> None:
    # Two `uac extract` processes start together; the model answers slowly, each batch with two
    # retractions of books its turn names. Whichever order, at most 3 go without review.
    runs = Runs(tmp_path, server, books())
    sources = runs.say(
        ("user", "I gave away Amber and Birch"),
        ("user", "I gave away Cedar and Delta"),
        ("user", "I gave away Ember and Fjord"),
    )
    pairs = dict(
        zip(sources, [("amber", "birch"), ("cedar", "delta"), ("ember", "fjord")], strict=True)
    )

    def responder(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][1]["content"]
        turns = prompt.split("Turns:")[-1]
        for src, ws in pairs.items():
            if f"[{src}]" in turns:
                return Reply(content=answer(gone(*ws), src), delay=0.5)
        return Reply(content=json.dumps({"operations": []}))

    server.responder = responder
    env = {**runs.env, "UAC_LOCK_TIMEOUT": "240"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "uac_kernel.cli.main", "extract", "--batch-size", "1"],
            cwd=tmp_path,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert 20 - len(runs.books()) <= 3
    with Workbench(runs.db, user="maya", read_only=True) as wb:
        assert wb.verify().ok
        # every turn answered once: applied or held, never both, never twice
        marked = [s for e in wb.log(kinds=["extraction"]) for s in e.payload["utterances"]]
        held = [s for e in wb.log(kinds=["review"]) for s in e.payload["utterances"]]
    assert sorted(marked + held) == sorted(sources)


def test_another_users_long_log_does_not_change_the_budget(
    tmp_path: Path, server: ChatServer
) -> None:
    # The budget is read from the log once per batch: 3,000 events of another user in the same
    # store neither spend nor renew this user's budget. (Its cost, measured outside the suite:
    # about 2 ms with no history, 9 ms with 300,000 events.)
    runs = Runs(tmp_path, server, books())
    noise = [
        {
            "kind": "utterance",
            "ts": "2025-02-01T10:00:00",
            "speaker": "user",
            "text": f"noise {i}",
            "source": f"noise#{i}",
        }
        for i in range(3000)
    ]
    with Workbench(runs.db, user="other") as wb:
        wb.ingest(noise)
    assert "1 applied" in runs.extract("I gave away Amber and Birch", *gone("amber", "birch"))
    assert "1 held for review" in runs.extract(
        "I gave away Cedar and Delta", *gone("cedar", "delta")
    )

"""Outside attacks (issue 25, parts 2-4, second pass) on the fixes just made: the review budget
and what counts as a mention, forget of notebook rule source, and a forget or import killed
before its file rewrite.

Real parts only: real DuckDB files in ``tmp_path``, `uac` commands (through its ``main``;
processes where a kill needs them), the real IPython-free Workbench API as a notebook drives it, the real ``openai`` client against the local
chat-completions server (``ChatServer``). Each case asserts the safe behaviour: what SHOULD
happen.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import uac_here as run_uac  # in process: see helpers.cli
from helpers.events import fact

from uac_kernel.log.store import Store
from uac_kernel.model.testing import ChatServer
from uac_kernel.workbench import Workbench

# -- harness (as tests/model/test_review_seams.py drives a hostile model) ----------------------------

WORDS = ["amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron"]


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
    """A store driven as a user drives it: turns ingested, then `uac extract` asks
    the local (hostile) server, which answers with the operations given."""

    def __init__(
        self, tmp_path: Path, server: ChatServer, history: list[dict[str, Any]], user: str = "maya"
    ):
        self.cwd, self.server, self.user = tmp_path, server, user
        self.db = tmp_path / "runs.duckdb"
        self.env = {
            "UAC_DB": str(self.db),
            "UAC_USER": user,
            "UAC_MODEL": "stand-in",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "",
            "UAC_LOCK_TIMEOUT": "120",
        }
        self.turns = 0
        if history:
            with Workbench(self.db, user=user) as wb:
                wb.ingest(history)

    def say(self, *turns: tuple[str, str]) -> list[str]:
        sources, events = [], []
        for speaker, text in turns:
            self.turns += 1
            src = f"chat-{self.user}#{self.turns}"
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
        self, text: str, *ops: dict[str, Any], constraints: Any = (), tries: int = 1
    ) -> str:
        """One run: the turn, and the answer of ``ops`` (given ``tries`` times: an answer the
        validation rejects is asked for once more)."""
        (src,) = self.say(("user", text))
        for _ in range(tries):
            self.server.enqueue(answer(list(ops), src, constraints))
        return self.uac("extract")

    def uac(self, *args: str) -> str:
        done = run_uac(*args, cwd=self.cwd, env=self.env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def state(self) -> dict[str, dict[str, Any]]:
        with Workbench(self.db, user=self.user, read_only=True) as wb:
            return {f"{t} {r.key}": r.fields() for t in wb.state.types for r in wb.state.all(t)}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


def raw_dir(root: Path, text: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``text``."""
    needle = text.encode()
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    )


# -- part 4: what is a mention -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "said"),
    [
        pytest.param("Bill Evans", "I paid the electricity bill", id="bill"),
        pytest.param("June Carter", "We fly out in June", id="june"),
        pytest.param("Morning run", "Good morning! Busy day.", id="morning-short-name"),
        pytest.param("Call plumber today", "Lovely weather today", id="today"),
    ],
)
def test_a_common_word_in_a_short_name_is_not_a_mention(
    tmp_path: Path, server: ChatServer, name: str, said: str
) -> None:
    # The issue: a mention is "a real reference to the record (its key, a distinctive value or
    # name), not a shared number or common word". A name of up to three words is name-like, so
    # its every word is distinctive, however common in the language.
    history = [
        fact("2025-01-10", "add", "Contact", "c-1", name=name),
        fact("2025-01-10", "add", "Contact", "c-2", name="Zoltan Kodaly"),
        fact("2025-01-10", "add", "Contact", "c-3", name="Ingrid Bergman"),
    ]
    runs = Runs(tmp_path, server, history)
    out = runs.extract(said, op("retract", "Contact", "c-1", reason="gone"))
    assert "1 held for review" in out, out
    assert "Contact c-1" in runs.state()


def test_an_add_over_an_existing_record_is_a_change(tmp_path: Path, server: ChatServer) -> None:
    # "add" is never counted as a change; if the log lets an add land on a record that exists,
    # the model overwrites what the turns never named, unreviewed.
    runs = Runs(tmp_path, server, books())
    out = runs.extract("hello there", op("add", "Book", "book-amber", title="pwned"), tries=2)
    assert runs.state()["Book book-amber"]["title"] == "Amber", out


@pytest.mark.parametrize(
    "key", ["BOOK-AMBER", " book-amber", "book-amber ", "book\u2010amber", "ｂook-amber"]
)
def test_a_key_spelled_otherwise_does_not_reach_the_record_unreviewed(
    tmp_path: Path, server: ChatServer, key: str
) -> None:
    runs = Runs(tmp_path, server, books())
    runs.extract("hello there", op("update", "Book", key, title="pwned"), tries=2)
    assert runs.state()["Book book-amber"]["title"] == "Amber"


def test_an_add_of_an_existing_constraint_key_is_a_change(
    tmp_path: Path, server: ChatServer
) -> None:
    # A constraint op "add" is not counted; adding over the key of one in force would replace
    # the user's rule unreviewed.
    rule = {
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
    }
    runs = Runs(tmp_path, server, [rule])
    weak = json.dumps(
        {
            "kind": "valid_on",
            "title": "Passport valid for trips to Mars",
            "document": {"type": "Passport"},
            "each": {"type": "Trip", "where": {"destination": "Mars"}},
            "at": {"fields": ["end"]},
        }
    )
    runs.extract(
        "hello there",
        constraints=[{"op": "add", "key": "passport-valid", "constraint": weak}],
        tries=2,
    )
    out = runs.uac("constraints")
    assert "every trip" in out and "Mars" not in out, out


def test_update_then_revert_in_one_answer_is_counted_once_not_free(
    tmp_path: Path, server: ChatServer
) -> None:
    # two ops on the same unmentioned record: still a change of an unmentioned record
    runs = Runs(tmp_path, server, books())
    out = runs.extract(
        "hello there",
        op("update", "Book", "book-amber", title="pwned"),
        op("update", "Book", "book-amber", author="x"),
    )
    assert "1 held for review" in out
    assert runs.state()["Book book-amber"]["title"] == "Amber"


def test_retract_and_readd_the_same_key_in_one_answer_is_held(
    tmp_path: Path, server: ChatServer
) -> None:
    runs = Runs(tmp_path, server, books())
    out = runs.extract(
        "hello there",
        op("retract", "Book", "book-amber", reason="x"),
        op("add", "Book", "book-amber", title="pwned"),
    )
    assert "1 held for review" in out, out
    assert runs.state()["Book book-amber"]["title"] == "Amber"


def test_the_budget_holds_across_a_forget_of_the_changed_records(
    tmp_path: Path, server: ChatServer
) -> None:
    # forget by record of what the unreviewed answers retracted: not a review, no refund
    runs = Runs(tmp_path, server, books())
    out = runs.extract(
        "I gave away Amber, Birch and Cedar",
        *[op("retract", "Book", f"book-{w}", reason="gave") for w in ("amber", "birch", "cedar")],
    )
    assert "1 applied" in out
    for w in ("amber", "birch", "cedar"):
        runs.uac("forget", "--record", "Book", f"book-{w}")
    out = runs.extract("I gave away Delta", op("retract", "Book", "book-delta", reason="gave"))
    assert "1 held for review" in out, out
    assert "Book book-delta" in runs.state()


def test_an_edit_in_between_does_not_renew_the_budget(tmp_path: Path, server: ChatServer) -> None:
    # a user's own ingest of a fact is not a review of what the model did
    runs = Runs(tmp_path, server, books())
    assert "1 applied" in runs.extract(
        "I gave away Amber, Birch and Cedar",
        *[op("retract", "Book", f"book-{w}", reason="g") for w in ("amber", "birch", "cedar")],
    )
    with Workbench(runs.db, user="maya") as wb:
        wb.ingest([fact("2025-03-02", "add", "Book", "book-new", title="Newly Bought")])
    out = runs.extract("I gave away Delta", op("retract", "Book", "book-delta", reason="g"))
    assert "1 held for review" in out, out


def test_a_forgotten_marker_keeps_the_budget_spent_over_many_runs(
    tmp_path: Path, server: ChatServer
) -> None:
    runs = Runs(tmp_path, server, books())
    assert "1 applied" in runs.extract(
        "I gave away Amber of Quorblax", op("retract", "Book", "book-amber", reason="g")
    )
    runs.uac("forget", "--text", "Quorblax")
    outs = [
        runs.extract(f"I gave away {w.title()}", op("retract", "Book", f"book-{w}", reason="g"))
        for w in ("birch", "cedar", "delta")
    ]
    # the marker holds no text of the turn, so it stays and still says 1 change: two more at most
    assert sum("1 applied" in o for o in outs) <= 2, outs
    assert sum("1 held for review" in o for o in outs) >= 1, outs


# -- part 3: forget and notebook rule source -------------------------------------------------------

RULE_SECRET = "Brindlewhistle"  # nowhere else


def cell_rule(source: str, name: str) -> Any:
    """The rule ``name`` a notebook cell of ``source`` defines, its source kept where inspect
    finds it (as the magics keep a cell's)."""
    from uac_kernel.rules.engine import Finding, rule

    filename = f"<cell-{hashlib.sha256(source.encode()).hexdigest()[:8]}>"
    namespace: dict[str, Any] = {"rule": rule, "Finding": Finding}
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def define(wb: Workbench, source: str, name: str) -> None:
    wb.define_rule(cell_rule(source, name), source)


def rules_segments(wb: Workbench) -> dict[int, str]:
    return dict(
        wb.store.con.execute(
            "SELECT version, text FROM checkpoint_segments WHERE segment = '3' ORDER BY version"
        ).fetchall()
    )


def no_secret_anywhere(db: Path, text: str = RULE_SECRET) -> None:
    assert raw_dir(db.parent, text) == [], raw_dir(db.parent, text)
    done = run_uac("verify", "--db", str(db), cwd=db.parent, env={})
    assert done.returncode == 0, done.stderr
    for v in range(1, 1 + int(_versions(db))):
        code = run_uac("code", "--version", str(v), "--db", str(db), cwd=db.parent, env={})
        assert code.returncode == 0 and text not in code.stdout, (v, code.stderr)


def _versions(db: Path) -> int:
    store = Store(db, read_only=True)
    try:
        row = store.con.execute("SELECT coalesce(max(version), 0) FROM checkpoints").fetchone()
        return int(row[0]) if row else 0
    finally:
        store.close()


DRUGS = [fact("2025-03-01T09:00:00", "add", "Drug", "d1", name="aspirin")]

SHAPES = {
    "decorator-argument": (
        f"@rule(watch=['Drug'], category={RULE_SECRET!r})\ndef flagged(user):\n    return []\n"
    ),
    "nested-def": (
        "@rule(watch=['Drug'])\ndef flagged(user):\n"
        f"    def inner(d):\n        return d.name == {RULE_SECRET!r}\n"
        "    return [Finding('x', [d]) for d in user.all('Drug') if inner(d)]\n"
    ),
    "indented-trailing-comment": (
        f"@rule(watch=['Drug'])\ndef flagged(user):\n    return []\n    # {RULE_SECRET}\n"
    ),
    "column-0-comment-inside": (
        f"@rule(watch=['Drug'])\ndef flagged(user):\n# {RULE_SECRET}\n    return []\n"
    ),
    "docstring-at-margin": (
        '@rule(watch=["Drug"])\ndef flagged(user):\n    """why:\n'
        f'{RULE_SECRET}\n"""\n    return []\n'
    ),
    "default-argument": (
        f"@rule(watch=['Drug'])\ndef flagged(user, word={RULE_SECRET!r}):\n    return []\n"
    ),
    "lambda-assignment": (
        f"flagged = rule(watch=['Drug'], name='flagged')(lambda user: [] or {RULE_SECRET!r} and [])\n"
    ),
    "rule-name-unlike-function": (
        f"@rule(watch=['Drug'], name='flagged')\ndef helper(user):\n    # {RULE_SECRET}\n"
        "    return []\n"
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_rule_of_any_shape_holding_the_text_leaves_every_checkpoint(
    tmp_path: Path, shape: str
) -> None:
    db = tmp_path / "s.duckdb"
    source = SHAPES[shape]
    name = "helper" if shape == "rule-name-unlike-function" else "flagged"
    with Workbench(db, user="maya") as wb:
        wb.ingest(DRUGS)
        wb.checkpoint()
        define(wb, source, name)
        wb.checkpoint()
        wb.ingest([fact("2025-03-02T09:00:00", "add", "Drug", "d2", name="ibuprofen")])
        wb.checkpoint()  # inherits the rules segment of checkpoint 2
        assert RULE_SECRET in wb.code(2)
        plan = wb.forget(text=RULE_SECRET)
        assert plan.rules, plan.summary()
        wb.ingest([fact("2025-03-03T09:00:00", "add", "Drug", "d3", name="naproxen")])
        wb.checkpoint()  # a checkpoint after the forget renders it not again
        assert "flagged" not in wb.runner.rules
    no_secret_anywhere(db)


def test_a_clean_redefinition_stays_in_force_after_the_old_source_is_forgotten(
    tmp_path: Path,
) -> None:
    # "a later clean redefinition stays": in the stored segment, and in force, and so in the
    # next checkpoint (the forget erased only an old source of the name).
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(DRUGS)
        define(
            wb,
            f"@rule(watch=['Drug'])\ndef flagged(user):\n    # {RULE_SECRET}\n    return []\n",
            "flagged",
        )
        wb.checkpoint()
        clean = "@rule(watch=['Drug'])\ndef flagged(user):\n    return []  # clean now\n"
        define(wb, clean, "flagged")
        wb.checkpoint()
        wb.forget(text=RULE_SECRET)
        assert "flagged" in wb.runner.rules, "the clean definition was taken out of force"
        wb.ingest([fact("2025-03-02T09:00:00", "add", "Drug", "d2", name="ibuprofen")])
        cp = wb.checkpoint()
        assert "# clean now" in wb.code(cp.version)
    no_secret_anywhere(db)


def test_a_rule_redefined_many_times_leaves_each_checkpoint_that_held_the_text(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(DRUGS)
        bodies = [
            f"    return []  # {RULE_SECRET} one\n",
            "    return []  # clean two\n",
            f"    return []  # {RULE_SECRET} three\n",
            "    return []  # clean four\n",
        ]
        for i, body in enumerate(bodies):
            define(wb, f"@rule(watch=['Drug'])\ndef flagged(user):\n{body}", "flagged")
            wb.ingest([fact(f"2025-03-0{i + 2}T09:00:00", "add", "Drug", f"x{i}", name=f"n{i}")])
            wb.checkpoint()
        wb.forget(text=RULE_SECRET)
        seg = rules_segments(wb)
        assert "clean two" in seg[2] and "clean four" in seg[4], seg
    no_secret_anywhere(db)


def test_forget_by_the_rules_own_source_erases_it_from_the_segments(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(DRUGS)
        define(
            wb,
            f"@rule(watch=['Drug'])\ndef flagged(user):\n    # {RULE_SECRET}\n    return []\n",
            "flagged",
        )
        wb.checkpoint()
        (ev,) = wb.log(kinds=["rule"])
        wb.forget(source=ev.source)
        assert "flagged" not in wb.runner.rules
    no_secret_anywhere(db)


def test_another_workbench_holding_the_rule_in_force_does_not_render_it_back(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.duckdb"
    env = {"UAC_LOCK_TIMEOUT": "120"}
    with Workbench(db, user="maya") as wb:
        wb.ingest(DRUGS)
        define(
            wb,
            f"@rule(watch=['Drug'])\ndef flagged(user):\n    return [] if {RULE_SECRET!r} else []\n",
            "flagged",
        )
        wb.checkpoint()
        wb.store._disconnect()  # let the other process have the file now
        done = run_uac(
            "forget",
            "--db",
            str(db),
            "--user",
            "maya",
            "--text",
            RULE_SECRET,
            cwd=tmp_path,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        wb.ingest([fact("2025-03-02T09:00:00", "add", "Drug", "d2", name="ibuprofen")])
        cp = wb.checkpoint()
        assert RULE_SECRET not in wb.code(cp.version)
    no_secret_anywhere(db)


def test_a_forget_in_another_workbench_does_not_disable_a_shipped_rule_of_the_same_name(
    tmp_path: Path,
) -> None:
    # A notebook rule took a shipped rule's name; forgetting its source names it in
    # `out_of_force`: a workbench that only ever had the shipped rule must keep it in force.
    db = tmp_path / "s.duckdb"
    shipped = "deadline_approaching"
    with Workbench(db, user="maya") as other:
        other.ingest(DRUGS)
        assert shipped in other.runner.rules
        with Workbench(db, user="maya") as wb:
            define(
                wb,
                f"@rule(watch=['Drug'])\ndef {shipped}(user):\n    return []  # {RULE_SECRET}\n",
                shipped,
            )
            wb.checkpoint()
            wb.forget(text=RULE_SECRET)
        other.refresh()
        assert shipped in other.runner.rules, "a shipped rule left force in another workbench"
    no_secret_anywhere(db)


def test_forget_then_checkpoint_then_verify_after_reopen(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(DRUGS)
        define(
            wb,
            f"@rule(watch=['Drug'])\ndef flagged(user):\n    return []  # {RULE_SECRET}\n",
            "flagged",
        )
        wb.checkpoint()
    run_uac(
        "forget", "--db", str(db), "--user", "maya", "--text", RULE_SECRET, cwd=tmp_path, env={}
    )
    done = run_uac("checkpoint", "--db", str(db), "--user", "maya", cwd=tmp_path, env={})
    assert done.returncode == 0, done.stderr
    no_secret_anywhere(db)


def test_a_forget_in_another_workbench_keeps_a_clean_definition_it_holds_in_force(
    tmp_path: Path,
) -> None:
    # The other workbench redefined the rule without the text; a forget of the old source in
    # another session names the rule in `out_of_force`: its clean one must stay in force.
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(DRUGS)
        define(
            wb,
            f"@rule(watch=['Drug'])\ndef flagged(user):\n    return []  # {RULE_SECRET}\n",
            "flagged",
        )
        wb.checkpoint()
        with Workbench(db, user="maya") as other:
            define(
                other,
                "@rule(watch=['Drug'])\ndef flagged(user):\n    return []  # clean\n",
                "flagged",
            )
            other.checkpoint()
            wb.forget(text=RULE_SECRET)
            other.refresh()
            assert "flagged" in other.runner.rules, "the clean definition left force"
    no_secret_anywhere(db)


# -- part 3: a forget or import killed between its erasure and the file rewrite ---------------

KILL_SECRET = "Zyloquentrix"


def big_store(db: Path, n: int = 40_000) -> None:
    """A store whose rewrite takes a while: the secret, then ``n`` other events."""
    lines = [
        {
            "kind": "utterance",
            "ts": "2025-03-01T09:00:00",
            "speaker": "user",
            "text": f"I am allergic to {KILL_SECRET}",
            "source": "chat#0",
        }
    ]
    lines += [
        fact("2025-03-01T10:00:00", "add", "Note", f"n{i}", text=f"note {i}") for i in range(n)
    ]
    src = db.parent / "big.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    done = run_uac("ingest", str(src), "--db", str(db), "--user", "maya", cwd=db.parent, env={})
    assert done.returncode == 0, done.stderr
    src.unlink()


def kill_when_rewriting(args: list[str], db: Path, cwd: Path) -> bool:
    """Run `uac ARGS`, SIGKILL it as soon as its rewrite of ``db`` begins (the ``.compact``
    file appears); whether the kill landed there."""
    fresh = db.with_name(db.name + ".compact")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uac_kernel.cli.main", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "UAC_LOCK_TIMEOUT": "120"},
    )
    deadline = time.monotonic() + 600  # a hang guard only
    while proc.poll() is None and time.monotonic() < deadline:
        if fresh.exists():
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.0005)
    proc.wait(timeout=600)
    return proc.returncode == -signal.SIGKILL


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("big") / "s.duckdb"
    big_store(db)
    return db


def killed_forget(big: Path, tmp_path: Path) -> Path:
    db = tmp_path / "s.duckdb"
    db.write_bytes(big.read_bytes())
    args = ["forget", "--db", str(db), "--user", "maya", "--text", KILL_SECRET]
    for _ in range(5):
        if kill_when_rewriting(args, db, tmp_path):
            return db
    pytest.skip("the rewrite never ran long enough to be killed in")  # pragma: no cover


def test_a_forget_killed_in_its_rewrite_fails_verify_then_the_next_writer_finishes(
    big: Path, tmp_path: Path
) -> None:
    db = killed_forget(big, tmp_path)
    bad = run_uac("verify", "--db", str(db), cwd=tmp_path, env={})
    assert bad.returncode != 0 and "Traceback" not in bad.stderr, bad.stderr
    assert "forget" in bad.stderr
    ok = run_uac("checkpoint", "--db", str(db), "--user", "maya", cwd=tmp_path, env={})
    assert ok.returncode == 0, ok.stderr
    assert raw_dir(tmp_path, KILL_SECRET) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.duckdb"], list(tmp_path.iterdir())
    assert run_uac("verify", "--db", str(db), cwd=tmp_path, env={}).returncode == 0


def test_a_read_only_open_of_a_store_owing_its_rewrite_leaves_it_owing(
    big: Path, tmp_path: Path
) -> None:
    db = killed_forget(big, tmp_path)
    for args in (["sql", "SELECT count(*) FROM events"], ["log"], ["code"]):
        done = run_uac(*args, "--db", str(db), "--user", "maya", cwd=tmp_path, env={})
        assert "Traceback" not in done.stderr, done.stderr
        assert KILL_SECRET not in done.stdout
    assert run_uac("verify", "--db", str(db), cwd=tmp_path, env={}).returncode != 0


def test_a_writer_open_before_the_kill_finishes_the_rewrite_at_its_next_write(
    big: Path, tmp_path: Path
) -> None:
    # "the next writer finishes it": a notebook's workbench, open since before the forget, is
    # the next to write; until a new process opens the store the erased bytes must not stay.
    db = tmp_path / "s.duckdb"
    db.write_bytes(big.read_bytes())
    with Workbench(db, user="maya") as wb:
        wb.store._disconnect()
        args = ["forget", "--db", str(db), "--user", "maya", "--text", KILL_SECRET]
        if not kill_when_rewriting(args, db, tmp_path):
            pytest.skip("the rewrite was not caught")  # pragma: no cover
        wb.ingest([fact("2025-03-05T09:00:00", "add", "Note", "late", text="written later")])
        wb.checkpoint()
        assert not wb.store.compaction_owed, "the next write left the rewrite owed"
        assert KILL_SECRET.encode() not in db.read_bytes()


def test_a_fleet_split_killed_at_any_point_is_cleaned_or_fails_verify(tmp_path: Path) -> None:
    root = tmp_path / "fleet"
    lines = [
        {"user": f"u{i % 50}", "kind": "fact", "ts": "2025-03-01T09:00:00", "op": "add",
         "type": "Note", "key": f"n{i}", "fields": {"text": f"note {i}"}, "source": f"s#{i}"}
        for i in range(20_000)
    ]  # fmt: skip
    src = tmp_path / "all.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    for delay in (0.5, 1.0, 1.5, 2.5):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uac_kernel.cli.main",
                "fleet",
                "run",
                str(root),
                "ingest",
                str(src),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=600)
        if not root.exists():
            continue
        left = list(root.rglob(".split-*"))
        verified = run_uac("verify", str(root), cwd=tmp_path, env={})
        if left:
            assert verified.returncode != 0 and ".split-" in verified.stderr, verified.stderr
        assert "Traceback" not in verified.stderr, verified.stderr
    done = run_uac("fleet", "run", str(root), "ingest", str(src), cwd=tmp_path, env={})
    assert done.returncode == 0, done.stderr
    assert list(root.rglob(".split-*")) == []
    assert run_uac("verify", str(root), cwd=tmp_path, env={}).returncode == 0

"""The rule name a constraint's key becomes: what a person reads in its alerts, chosen when the
key is added and kept (``uac_kernel.core.constraint_names``)."""

from __future__ import annotations

import keyword
import unicodedata
from datetime import datetime
from pathlib import Path
from typing import Any

from helpers.alerts import alerts
from helpers.events import clock

from uac_kernel import Workbench
from uac_kernel.core.constraint_names import WORDS, free_rule_name, legacy_rule_name, rule_name
from uac_kernel.log.store import NewEvent

# Due before the clock: each one stands as an alert at once.
DUE = {"kind": "obligation", "title": "Vaccinate the dog", "due": {"date": "2025-01-02"}}


def bench(path: str | Path = ":memory:") -> Workbench:
    wb = Workbench(path, "u", rules=[])
    wb.ingest([clock("2025-01-01")])
    return wb


def names(wb: Workbench) -> dict[str, str]:
    return {cv.key: cv.rule for cv in wb.constraints()}


def add_keys(wb: Workbench, *keys: str) -> dict[str, str]:
    """Put ``DUE`` in force under each key in turn; then each key in force and its rule name."""
    for key in keys:
        wb.constrain(DUE, key=key)
    return names(wb)


def test_a_key_with_hyphens_reads_as_its_words() -> None:
    assert rule_name("rabies-for-pet-trips") == "constraint_rabies_for_pet_trips"
    assert rule_name("Rabies for pet trips!") == "constraint_rabies_for_pet_trips"
    assert rule_name("schengen_90_180") == "constraint_schengen_90_180"
    wb = bench()
    wb.constrain(DUE, key="rabies-for-pet-trips")
    (a,) = alerts(wb)
    assert a.rule == "constraint_rabies_for_pet_trips"
    assert a.id.startswith("constraint_rabies_for_pet_trips:")
    assert wb.constraint_of(a.rule) is not None


def test_unicode_letters_stay_as_a_python_identifier_reads_them() -> None:
    assert rule_name("Tollwut für Reisen") == "constraint_tollwut_für_reisen"
    assert rule_name("狂犬病-ワクチン") == "constraint_狂犬病_ワクチン"
    # NFKC, as Python normalises an identifier: checkpoint code binds the name it is given
    assert rule_name("ﬁle ①") == "constraint_file_1"
    assert rule_name("Straße") == "constraint_strasse"
    for key in ["Tollwut für Reisen", "狂犬病-ワクチン", "ﬁle ①", "e\u0301t\u00e9", "Ωμέγα"]:
        name = rule_name(key)
        assert name.isidentifier() and unicodedata.normalize("NFKC", name) == name


def test_a_key_of_punctuation_alone_is_unnamed_and_a_second_one_numbered() -> None:
    assert rule_name("!!!") == "constraint_unnamed"
    assert rule_name("\u202e") == "constraint_unnamed"
    wb = bench()
    assert add_keys(wb, "!!!", "???") == {
        "!!!": "constraint_unnamed",
        "???": "constraint_unnamed_2",
    }
    assert len(alerts(wb)) == 2


def test_a_python_keyword_or_module_name_is_safe_behind_the_prefix() -> None:
    for word in [*keyword.kwlist, "date", "Record", "rule"]:
        name = rule_name(word)
        assert name == f"constraint_{word.lower()}"
        assert name.isidentifier() and not keyword.iskeyword(name)


def test_a_long_key_is_cut_at_a_word() -> None:
    words = "renew the registration of the car a month before it expires every year"
    name = rule_name(words)
    assert name == "constraint_renew_the_registration_of_the_car_a_month_before"
    assert len(name) <= len("constraint_") + WORDS
    assert rule_name("x" * 500) == "constraint_" + "x" * WORDS


def test_the_key_added_first_keeps_the_plain_name() -> None:
    assert free_rule_name("pet-trips", {"constraint_pet_trips"}) == "constraint_pet_trips_2"
    wb = bench()
    add_keys(wb, "pet-trips")
    first = {a.id for a in alerts(wb)}
    assert add_keys(wb, "pet_trips", "Pet trips") == {
        "pet-trips": "constraint_pet_trips",
        "pet_trips": "constraint_pet_trips_2",
        "Pet trips": "constraint_pet_trips_3",
    }
    # the new ones did not rename the first one's alert
    assert first <= {a.id for a in alerts(wb)} and len(alerts(wb)) == 3


def test_a_key_keeps_its_name_through_updates_retracts_and_its_return() -> None:
    wb = bench()
    add_keys(wb, "a-b", "a_b")
    wb.constrain({**DUE, "title": "Changed"}, key="a-b")
    assert names(wb)["a-b"] == "constraint_a_b"
    wb.retract_constraint("a-b")
    # a key added after the retract does not take the name of the retracted one: its logged
    # alerts stay its own
    assert add_keys(wb, "A B", "a-b") == {
        "a_b": "constraint_a_b_2",
        "A B": "constraint_a_b_3",
        "a-b": "constraint_a_b",
    }


def test_names_are_in_the_log_so_an_open_and_a_checkpoint_give_the_same(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    wb = bench(path)
    wb.constrain({"a-b": DUE, "a_b": DUE, "für": DUE})
    code = wb.checkpoint().code
    before = names(wb)
    assert before == {"a-b": "constraint_a_b", "a_b": "constraint_a_b_2", "für": "constraint_für"}
    # the code holds constraints by key, in log order: the names they get follow from it
    assert code.index("'a-b'") < code.index("'a_b'")
    events = len(list(wb.store.events("u")))
    wb.close()
    for snapshots in (True, False):
        again = Workbench(path, "u", rules=[], snapshots=snapshots)
        assert names(again) == before
        assert len(list(again.store.events("u"))) == events  # no alert raised or cleared
        again.close()
    other = bench(tmp_path / "t.db")
    other.constrain({"a-b": DUE, "a_b": DUE, "für": DUE})
    assert other.checkpoint().code == code


def legacy_store(path: Path, key: str) -> None:
    """A store as a uac before names were chosen left it: the add logged without ``rule``,
    and its alert logged under the hashed name that uac gave it."""
    wb = bench(path)
    wb.store.append(
        [
            NewEvent(
                datetime(2025, 1, 1, 10),
                "constraint",
                "u",
                {"kind": "constraint", "op": "add", "key": key, "constraint": DUE},
                f"constraint:{key}@2",
            )
        ]
    )
    wb.close()


def alert_events(wb: Workbench) -> list[dict[str, Any]]:
    return [ev.payload for ev in wb.store.events("u", kinds=["alert"])]


def test_a_constraint_logged_before_names_were_chosen_keeps_its_name(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    legacy_store(path, "rabies-for-pet-trips")
    old = legacy_rule_name("rabies-for-pet-trips")
    assert old.startswith("constraint_rabies_for_pet_trips_") and old != rule_name(
        "rabies-for-pet-trips"
    )
    wb = Workbench(path, "u", rules=[])
    assert [a["rule"] for a in alert_events(wb)] == [old]
    wb.close()
    # opened again, and with a new constraint of the same words: the logged alert still
    # matches its rule, nothing is cleared or raised again, and the new key takes the plain name
    wb = Workbench(path, "u", rules=[])
    assert len(alert_events(wb)) == 1
    assert add_keys(wb, "rabies for pet trips") == {
        "rabies-for-pet-trips": old,
        "rabies for pet trips": "constraint_rabies_for_pet_trips",
    }
    assert [(a["state"], a["rule"]) for a in alert_events(wb)] == [
        ("raised", old),
        ("raised", "constraint_rabies_for_pet_trips"),
    ]
    # an update keeps the old name, and the alert's id
    wb.constrain({**DUE, "title": "Rabies shot"}, key="rabies-for-pet-trips")
    assert names(wb)["rabies-for-pet-trips"] == old
    wb.close()


def test_an_input_event_cannot_choose_a_rule_name(tmp_path: Path) -> None:
    import json

    import pytest

    from uac_kernel.core.errors import EventError

    wb = bench()
    src = tmp_path / "c.jsonl"
    ev = {"kind": "constraint", "ts": "2025-01-01T10:00:00", "op": "add", "key": "k"}
    src.write_text(json.dumps({**ev, "constraint": DUE, "rule": "constraint_x"}) + "\n")
    with pytest.raises(EventError, match="rule"):
        wb.ingest(src)

"""The matcher (uac_kernel/vocab/matcher.py): bindings proposed from a user's own names.

Concepts not in the catalogue on this branch, so not tested here yet: medication.refills
(``Script.repeats_remaining``), food.text (``Booking.dishes``), duty.done, payment.account (a
``from`` field whose values are Account keys).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from helpers.events import fact

from uac_kernel.ingest.events import parse_objects, plan_batch
from uac_kernel.log.store import Store
from uac_kernel.state.fold import State
from uac_kernel.vocab import Binding, Vocabulary
from uac_kernel.vocab.matcher import propose, unwatched

Schema = Mapping[str, Mapping[str, str]]


def proposals(
    schema: Schema,
    vocab: Vocabulary | None = None,
    values: Mapping[tuple[str, str], Sequence[Any]] | None = None,
    keys: Mapping[str, Collection[str]] | None = None,
) -> dict[tuple[str, str | None, str], Binding]:
    """(type, field, target) → the proposal, for every one made."""
    got = propose(
        schema,
        vocab or Vocabulary(),
        values=None if values is None else (lambda t, f: values.get((t, f), [])),
        keys=None if keys is None else (lambda t: keys.get(t, [])),
    )
    for b in got:
        assert b.author == "inferred" and 0.0 <= b.score <= 1.0 and b.reason
        assert b.status in ("used", "held")
    return {(b.type, b.field, b.target): b for b in got}


def status(got: Mapping[tuple[str, str | None, str], Binding], *key: Any) -> str | None:
    b = got.get(key)
    return None if b is None else b.status


def test_the_issues_names_bind_to_their_concepts_with_reasons() -> None:
    got = proposals(
        {
            "Journey": {"leaves_on": "date", "returns_on": "date"},
            "Shot": {"valid_thru": "date", "vaccine": "str"},
            "Homework": {"turn_in": "date", "subject": "str"},
            "Purchase": {"priceGBP": "float"},
        }
    )
    assert status(got, "Journey", None, "trip") == "used"
    assert status(got, "Journey", "leaves_on", "trip.start") == "used"
    assert status(got, "Journey", "returns_on", "trip.end") == "used"
    assert status(got, "Shot", None, "document") == "used"
    thru = got[("Shot", "valid_thru", "document.expiry")]
    assert thru.status == "used"
    assert "abbreviation thru→until" in thru.reason and "date field" in thru.reason
    assert "Shot plays document" in thru.reason
    assert status(got, "Homework", "turn_in", "duty.due") == "used"
    price = got[("Purchase", "priceGBP", "payment.amount")]
    assert price.status == "used" and "currency GBP" in price.reason
    # valid_thru is an expiry, not a booking's end ("until" explains only half the name)
    assert ("Shot", "valid_thru", "booking.end") not in got


def test_camel_case_and_lower_case_names_bind() -> None:
    got = proposals(
        {"medication": {"drugName": "str"}, "flight_leg": {"departure": "datetime"}},
        values={("medication", "drugName"): ["warfarin", "Advil"]},
    )
    assert status(got, "medication", None, "medication") == "used"
    name = got[("medication", "drugName", "medication.name")]
    assert name.status == "used" and "values look like drug names" in name.reason
    assert status(got, "flight_leg", None, "travel_leg") == "used"


def test_a_time_zone_field_named_zone_is_read_when_its_values_are_zones() -> None:
    schema = {"Meeting": {"zone": "str", "begins": "datetime"}}
    zones = proposals(schema, values={("Meeting", "zone"): ["America/New_York", "+01:00"]})
    assert status(zones, "Meeting", "zone", "booking.timezone") == "used"
    # a "zone" of garden beds is no time zone: its name alone does not make it one
    beds = proposals(schema, values={("Meeting", "zone"): ["north bed", "south bed", "pond"]})
    bed = beds[("Meeting", "zone", "booking.timezone")]
    assert bed.status == "held" and "values do not look like time zones" in bed.reason


def test_a_text_field_of_a_critical_role_is_held_on_a_loose_name_alone() -> None:
    # `drugName` says it whole; `primary_drug` only partly, and critical rules read medication
    got = proposals({"medication": {"drugName": "str", "primary_drug": "str"}})
    assert got[("medication", "drugName", "medication.name")].status == "used"
    b = got[("medication", "primary_drug", "medication.name")]
    assert b.status == "held" and "name only" in b.reason


def test_flags_that_silence_alerts_are_never_used_from_a_name() -> None:
    got = proposals({"Homework": {"turn_in": "bool"}, "Outing": {"scrapped_maybe": "bool"}})
    assert status(got, "Homework", "turn_in", "record.settled") == "held"
    assert status(got, "Outing", "scrapped_maybe", "record.called_off") == "held"
    assert "bind it by hand" in got[("Homework", "turn_in", "record.settled")].reason
    # a bool is never a due date
    assert ("Homework", "turn_in", "duty.due") not in got


def test_wrong_kinds_never_bind() -> None:
    got = proposals(
        {
            "Shot": {"valid_thru": "str"},
            "Hike": {"starting": "str", "begins": "int"},
            "Purchase": {"price": "str"},
        }
    )
    targets = {t for (_, _, t) in got}
    assert not targets & {"document.expiry", "trip.start", "booking.start", "payment.amount"}


def test_ambiguous_fields_are_held_not_used() -> None:
    got = proposals({"Journey": {"leave_date": "date", "departure_date": "date"}})
    leave = got[("Journey", "leave_date", "trip.start")]
    depart = got[("Journey", "departure_date", "trip.start")]
    assert leave.status == depart.status == "held"
    assert "fits trip.start too" in leave.reason


def test_a_name_two_roles_fit_equally_is_held() -> None:
    # A Transfer is a payment by default; that "transfer" is also an airport transfer is no
    # reason to make it a leg of a trip
    got = proposals({"Transfer": {"amt": "float"}})
    assert status(got, "Transfer", None, "travel_leg") == "held"
    assert status(got, "Transfer", "amt", "payment.amount") == "used"


def test_a_misspelt_name_is_held() -> None:
    got = proposals({"Shot": {"expiery": "date"}})
    b = got[("Shot", "expiery", "document.expiry")]
    assert b.status == "held" and "misspelling" in b.reason


def test_nothing_the_vocabulary_has_is_proposed_again() -> None:
    schema = {"Journey": {"leaves_on": "date", "start": "date"}, "Trip": {"depart": "date"}}
    rejected = Binding("trip.start", "Journey", "leaves_on", author="person", status="rejected")
    plays = Binding("trip", "Journey", author="person")
    got = proposals(schema, Vocabulary([rejected, plays]))
    assert ("Journey", "leaves_on", "trip.start") not in got  # a person said no
    assert ("Journey", None, "trip") not in got  # a person already said yes
    assert ("Journey", "start", "trip.start") not in got  # the default already reads it
    assert ("Trip", None, "trip") not in got  # a default type
    assert status(got, "Trip", "depart", "trip.start") == "used"
    # a field a person bound to one of a role's concepts gets no other of that role
    person = Binding("trip.end", "Journey", "leaves_on", author="person")
    assert ("Journey", "leaves_on", "trip.start") not in proposals(schema, Vocabulary([person]))


def test_traps_are_not_bound_wrongly() -> None:
    got = proposals(
        {
            # a pet-sitting client's passport: not the user's trip, nor a drug
            "Passport": {"client_name": "str", "pet_name": "str", "expiry": "date"},
            "Hike": {"start": "str", "start_point": "str"},
        },
        values={("Passport", "pet_name"): ["Biscuit"], ("Hike", "start"): ["the car park"]},
    )
    # its expiry is a passport's expiry (not a contract's end), held: the passport is a client's
    assert got[("Passport", "expiry", "document.expiry")].status == "held"
    assert not any(b.target == "term.ends" for b in got.values())
    assert all(
        b.status == "held" for b in got.values() if b.type == "Passport" and b.field != "expiry"
    )
    assert not any(
        b.target in ("trip", "medication") or b.target.startswith("trip.") for b in got.values()
    )
    assert not any(b.type == "Hike" and b.status == "used" for b in got.values())


def test_a_link_alone_is_a_held_proposal() -> None:
    got = proposals(
        {"Journey": {"leaves_on": "date", "ref": "str"}, "Country": {"name": "str"}},
        values={("Journey", "ref"): ["fr", "jp", "fr"]},
        keys={"Country": ["fr", "jp"]},
    )
    b = got[("Journey", "ref", "trip.country")]
    assert b.status == "held" and "values are keys of Country" in b.reason


def test_each_fields_values_are_read_at_most_once() -> None:
    schema = {
        f"Thing{i}": {**{f"note_{j}": "str" for j in range(18)}, "zone": "str", "country": "str"}
        for i in range(30)
    }
    calls: list[tuple[str, str]] = []

    def values(t: str, f: str) -> list[str]:
        calls.append((t, f))
        return ["Europe/Paris"]

    propose(schema, Vocabulary(), values=values, keys=lambda t: [t.lower()])
    assert len(calls) == len(set(calls)) <= 30 * 20


def test_proposals_from_a_store_bind_and_rules_read_them(tmp_path: Path) -> None:
    st = State("u")
    store = Store(tmp_path / "u.duckdb")
    events = [
        fact("2025-01-01", "add", "Journey", "j1", leaves_on="2025-06-01", country="France"),
        fact("2025-01-01", "add", "Shot", "s1", valid_thru="2025-05-01", holder="me"),
    ]
    st.apply_all(store.append(plan_batch(st, parse_objects(events))))
    store.close()
    # ingest proposed them with the batch; from the stored records the matcher says the same
    got = propose(
        st.schema.types,
        Vocabulary(),
        values=lambda t, f: [r.__dict__.get(f) for r in st.all(t)],
        keys=lambda t: [r.key for r in st.all(t)],
        types=["Journey"],
    )
    assert {b.type for b in got} == {"Journey"}
    assert {b.key for b in got if b.status == "used"} >= {
        b.key for b in st.vocab.bindings if b.type == "Journey" and b.status == "used"
    }
    assert "Journey" in st.vocab.types("trip")
    assert st.vocab.fields("Journey", "trip.start")[0] == "leaves_on"


def test_unwatched_lists_what_looks_like_dates_amounts_documents_and_substances() -> None:
    schema = {
        "Shot": {"valid_thru": "date", "given_on": "date"},
        "Homework": {"turn_in": "date"},
        "Purchase": {"priceGBP": "float", "count": "int"},
        "Note": {"text": "str", "pet_name": "str"},
    }
    found = unwatched(
        schema,
        Vocabulary(),
        read={("Shot", "given_on")},
        values=lambda t, f: ["took ibuprofen"] if (t, f) == ("Note", "text") else [],
    )
    by = {(u.type, u.field): u for u in found}
    assert by[("Shot", "valid_thru")].looks == "date"
    assert ("Shot", None) not in by  # one of its fields is read
    assert ("Shot", "given_on") not in by
    assert by[("Homework", "turn_in")].looks == "deadline"
    assert by[("Purchase", "priceGBP")].looks == "amount"
    assert ("Purchase", "count") not in by
    assert by[("Note", "text")].looks == "substance"
    assert ("Note", "pet_name") not in by
    assert (
        by[("Homework", "turn_in")].describe().startswith("Homework.turn_in: looks like a deadline")
    )
    unread = unwatched({"Shot": {"vaccine": "str"}}, Vocabulary(), read=set())
    assert [(u.type, u.looks) for u in unread] == [("Shot", "document")]


def test_a_called_off_flag_named_whole_is_used() -> None:
    # Left unread, a trip's own word for cancelled keeps the trip alive: a passport expiring
    # after it would raise a false critical alert on a trip that will not happen.
    got = proposals({"Outing": {"scrapped": "bool"}, "Journey": {"axed": "bool"}})
    assert status(got, "Outing", "scrapped", "record.called_off") == "used"
    assert status(got, "Journey", "axed", "record.called_off") == "used"


def test_a_flags_tense_is_its_meaning() -> None:
    # under way is not done: "shutting" is the account closing, not closed
    got = proposals({"BankAccount": {"shutting": "bool", "bank": "str"}})
    shutting = got[("BankAccount", "shutting", "account.closed")]
    assert shutting.status == "held" and "tense" in shutting.reason
    got = proposals({"BankAccount": {"is_closing": "bool", "bank": "str"}})
    assert status(got, "BankAccount", "is_closing", "account.closing") == "used"


def test_phrasal_and_doubled_forms_bind() -> None:
    got = proposals(
        {"Journey": {"setting_off": "date", "getting_back": "date", "headed_to": "str"}},
        values={("Journey", "headed_to"): ["Lisbon", "Kyoto"]},
    )
    assert status(got, "Journey", "setting_off", "trip.start") == "used"
    assert status(got, "Journey", "getting_back", "trip.end") == "used"
    assert status(got, "Journey", "headed_to", "trip.destination") in ("used", "held")


def test_a_field_is_read_as_every_concept_its_meaning_carries() -> None:
    # Under the catalogue's names a trip's start is also a booking's start and a planned
    # activity's day: a field bound as the start is read as those too, and a type playing trip
    # plays planned_activity as a Trip does.
    got = proposals({"Journey": {"leaves_on": "date", "comes_back": "date"}})
    assert status(got, "Journey", None, "planned_activity") == "used"
    assert (
        "as Trip, a trip, is a planned_activity"
        in got[("Journey", None, "planned_activity")].reason
    )
    start = got[("Journey", "leaves_on", "booking.start")]
    assert start.status == "used" and "trip.start's 'start' is also booking.start" in start.reason
    # activity.when reads a trip's end first, as its defaults do (end, start, date)
    assert status(got, "Journey", "comes_back", "activity.when") == "used"
    assert status(got, "Journey", "comes_back", "booking.end") == "used"
    # never into a flag that silences alerts, and never onto a role the type does not play
    assert all(t != "record.called_off" for (_, _, t) in got)
    assert ("Journey", "leaves_on", "medication.start") not in got


def test_two_concepts_read_from_one_name_are_no_rivals() -> None:
    # trip.destination and trip.places both read "destination": a field may carry both
    got = proposals(
        {"Journey": {"departs": "date", "going_to": "str"}},
        values={("Journey", "going_to"): ["Lisbon", "Kyoto", "Oslo"]},
    )
    b = got[("Journey", "going_to", "trip.destination")]
    assert "fits trip.places too" not in b.reason


def test_a_pets_or_clients_passport_is_never_read_as_the_users(tmp_path: Path) -> None:
    from uac_kernel.rules import library as lib
    from uac_kernel.state.query import UserView

    schema = {
        "PetPassport": {"animal": "str", "valid_until": "date", "chip_no": "str"},
        "ClientPassport": {"customer": "str", "exp_date": "date"},
        # the user's own passport type, whose fields name a dog: still not the user's
        "Passport": {"dog_name": "str", "valid_thru": "date"},
        "Journey": {"leaves_on": "date", "back_on": "date", "country": "str"},
    }
    got = proposals(schema)
    others = ("PetPassport", "ClientPassport", "Passport")
    # no passport or document role, and none of their concepts, is used for them
    used = [
        b
        for b in got.values()
        if b.type in others and b.status == "used" and not b.target.startswith("record")
    ]
    assert used == []
    held = got[("PetPassport", None, "passport")]
    assert held.status == "held" and "not the user's" in held.reason
    # and the rule reads no passport of theirs for the user's trip
    events = [
        fact(
            "2026-01-01",
            "add",
            "PetPassport",
            "pp1",
            animal="Rex the dog",
            valid_until="2026-03-01",
            chip_no="9851",
        ),
        fact("2026-01-01", "add", "Passport", "p1", dog_name="Rex", valid_thru="2026-03-01"),
        fact(
            "2026-01-01",
            "add",
            "Journey",
            "j1",
            leaves_on="2026-06-01",
            back_on="2026-06-10",
            country="Japan",
        ),
    ]
    st = State("u")
    store = Store(tmp_path / "u.duckdb")
    st.apply_all(store.append(plan_batch(st, parse_objects(events))))
    store.close()
    assert "Journey" in st.vocab.types("trip")
    assert lib.passport_validity.alerts(UserView(st)) == {}


def test_a_date_named_in_the_past_tense_is_never_a_limit_ahead() -> None:
    # a book's `finished` is when it was read, not a contract's end or a deadline
    got = proposals({"Book": {"title": "str", "finished": "date"}})
    assert not {"term.ends", "duty.due"} & {b.target for b in got.values()}
    assert got[("Book", "finished", "record.done_on")].status == "used"
    # and `turn_in` still is a deadline
    assert ("Homework", "turn_in", "duty.due") in proposals({"Homework": {"turn_in": "date"}})


def test_a_verb_form_never_reads_as_a_function_word_nor_a_noun_in_ing() -> None:
    # "noted" is not "not" (a recurring skip "not on"); a Book is not a booking (a meal
    # reservation); a Meeting is still a meeting and a booking_date a booking's day.
    got = proposals({"Allergy": {"noted": "date", "substance": "str"}})
    assert not any(c.startswith("recurring.") for (_, _, c) in got)
    got = proposals({"Book": {"title": "str", "finished": "date"}})
    assert ("Book", None, "meal") not in got
    assert status(got, "Book", "finished", "record.done_on") == "used"
    assert ("Book", "finished", "booking.end") not in got  # past tense: not an end ahead


def test_companions_do_not_narrow_who_travels() -> None:
    # companions travel with the user: read as the travellers, the user's own passport
    # would drop out of the check
    got = proposals({"Trip": {"companions": "list[str]"}})
    assert ("Trip", "companions", "trip.travellers") not in got


def test_values_alone_say_a_drug_name_where_the_name_says_nothing() -> None:
    pills = {"Pill": {"zq": "str", "strength": "str"}}
    got = proposals(pills, values={("Pill", "zq"): ["sertraline", "tramadol"]})
    name = got[("Pill", "zq", "medication.name")]
    assert name.status == "used" and "values look like drug names (2/2)" in name.reason
    assert "values show medication.name" in got[("Pill", None, "medication")].reason
    # the same drug names could be an allergy's: the type's name says which
    assert not any(c.startswith("allergy") for (_, _, c) in got)
    # where no name says, both stay held for a person to decide
    got = proposals({"Zq": {"zq": "str"}}, values={("Zq", "zq"): ["sertraline", "tramadol"]})
    assert {c: b.status for (_, _, c), b in got.items()} == {
        "allergy": "held", "medication": "held", "allergy.allergen": "held",
        "medication.name": "held",
    }  # fmt: skip
    # a note that mentions a drug is no drug name
    said = ["took sertraline after lunch with water", "tramadol"]
    got = proposals(pills, values={("Pill", "zq"): said})
    assert ("Pill", "zq", "medication.name") not in got


def test_two_dates_in_order_are_a_trips_start_and_end() -> None:
    trip = {"Trip": {"p": "date", "q": "date"}}
    early, late = ["2025-05-01", "2025-06-01"], ["2025-05-09", "2025-06-03"]
    got = proposals(trip, values={("Trip", "p"): early, ("Trip", "q"): late})
    start = got[("Trip", "p", "trip.start")]
    assert start.status == "used" and "'q' is never before 'p' in 2 records" in start.reason
    assert status(got, "Trip", "q", "trip.end") == "used"
    # beside a start named so, the one date never before it is the end
    got = proposals(
        {"Trip": {"start": "date", "q": "date"}},
        values={("Trip", "start"): early, ("Trip", "q"): late},
    )
    assert status(got, "Trip", "q", "trip.end") == "used"
    assert ("Trip", "start", "trip.start") not in got  # the default reads it already
    # dates that cross, a record lacking one, or one date alone show nothing
    crossed = ["2025-05-09", "2025-05-30"]
    for values in (
        {("Trip", "p"): early, ("Trip", "q"): crossed},
        {("Trip", "p"): early, ("Trip", "q"): late[:1]},
        {("Trip", "p"): early, ("Trip", "q"): early},
    ):
        got = proposals(trip, values=values)
        assert not any(c in ("trip.start", "trip.end") for (_, _, c) in got), values

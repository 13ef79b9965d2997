"""A function of one record remembered per record and vocabulary (``vocab.resolve.per_record``)."""

from __future__ import annotations

import gc
import threading
from datetime import date

from uac_kernel.core.records import new_record, record_class
from uac_kernel.core.words import country as _country
from uac_kernel.core.words import norm as _norm
from uac_kernel.rules.library._common import _get, _trip_days
from uac_kernel.rules.library.travel import _areas, _trip_countries
from uac_kernel.state.fold import State
from uac_kernel.vocab import Binding, concept
from uac_kernel.vocab.resolve import noting, per_record, using

FIELDS = {
    "leaves_on": "date",
    "start": "date",
    "end": "date",
    "country": "str",
    "nation": "str",
    "status": "str",
}
Journey = record_class("Journey", FIELDS)


def journey(**values: object) -> object:
    return new_record(Journey, {f: values.get(f) for f in FIELDS})


def test_a_remembered_value_is_worked_out_once_per_record_and_vocabulary() -> None:
    calls: list[object] = []

    @per_record
    def start(rec: object) -> object:
        calls.append(rec)
        return _get(rec, concept("trip.start"))

    may, june, july = date(2026, 5, 1), date(2026, 6, 1), date(2026, 7, 1)
    a, b = journey(start=may, leaves_on=june), journey(start=july)
    assert [start(a), start(a), start(b), start(a)] == [may, may, july, may]
    assert calls == [a, b]
    st = State("u")
    st.bind([Binding("trip.start", "Journey", "leaves_on", author="person")])
    with using(st.vocab):  # another vocabulary reads another field: worked out again
        assert start(a) == june
        assert start(a) == june
    assert calls == [a, b, a]


def test_a_remembered_value_notes_the_bindings_it_read_on_every_call() -> None:
    st = State("u")
    st.bind([Binding("trip.start", "Journey", "leaves_on", author="person")])
    j = journey(leaves_on=date(2026, 5, 1), end=date(2026, 5, 9), country="France")
    with using(st.vocab):
        with noting() as first:
            days = _trip_days(j)
        with noting() as again:  # remembered: nothing is read, yet the same is noted
            assert _trip_days(j) is days
    assert days == (date(2026, 5, 1), date(2026, 5, 9), False)
    assert first and first == again
    assert any(b.field == "leaves_on" for b in again)


def test_a_remembered_value_follows_a_new_record_not_an_old_one() -> None:
    # Records are frozen: a change is a new record, which is worked out anew.
    was = journey(start=date(2026, 5, 1), end=date(2026, 5, 3), country="France")
    now = journey(
        start=date(2026, 5, 1), end=date(2026, 5, 3), country="France", status="cancelled"
    )
    assert _trip_days(was)[2] is False
    assert _trip_days(now)[2] is True
    assert _areas(was) == _trip_countries(was) | {_norm("Schengen")}
    assert _trip_countries(now) == frozenset({_country("France")})


def test_a_remembered_value_is_forgotten_with_its_record() -> None:
    seen: list[int] = []

    @per_record
    def length(rec: object) -> int:
        seen.append(1)
        return len(str(_get(rec, "country")))

    memo = next(
        c.cell_contents for c in (length.__closure__ or ()) if isinstance(c.cell_contents, dict)
    )
    recs = [journey(country="x" * i) for i in range(50)]
    assert [length(r) for r in recs] == list(range(50))
    assert len(memo) == 50
    del recs
    gc.collect()
    assert memo == {}


def test_a_record_at_the_address_of_a_dead_one_is_worked_out_anew() -> None:
    seen = 0
    for i in range(200):
        a = journey(start=date(2026, 5, 1), end=date(2026, 5, 3), country="France")
        addr = id(a)
        assert _trip_days(a)[0] == date(2026, 5, 1)
        del a
        b = journey(start=date(2027, 1, 1 + i % 28), country="Japan")
        seen += id(b) == addr
        assert _trip_days(b) == (date(2027, 1, 1 + i % 28), None, False)
        assert _trip_countries(b) == frozenset({_country("Japan")})
        del b
    assert seen  # the address was reused


def test_a_rebind_and_an_unbind_are_not_served_stale() -> None:
    st = State("u")
    j = journey(
        leaves_on=date(2026, 6, 1), start=date(2026, 5, 1), country="France", nation="Japan"
    )
    assert _trip_days(j)[0] == date(2026, 5, 1)
    st.bind(
        [
            Binding("trip.start", "Journey", "leaves_on", author="person"),
            Binding("trip.country", "Journey", "nation", author="person"),
        ]
    )
    with using(st.vocab):
        assert _trip_days(j)[0] == date(2026, 6, 1)
        assert _country("Japan") in _areas(j)
    st.bind([Binding("trip.start", "Journey", "leaves_on", author="person", status="rejected")])
    st.unbind(("trip.country", "Journey", "nation"))
    with using(st.vocab), noting() as read:
        assert _trip_days(j)[0] == date(2026, 5, 1)
        assert _country("Japan") not in _areas(j)
    assert not read


def test_threads_with_two_vocabularies_each_read_their_own() -> None:
    st = State("u")
    st.bind([Binding("trip.start", "Journey", "leaves_on", author="person")])
    vocab = st.vocab
    recs = [journey(leaves_on=date(2026, 6, 1), start=date(2026, 5, 1)) for _ in range(300)]
    bad: list[object] = []

    def work(bound: bool) -> None:
        for _ in range(30):
            for r in recs:
                if bound:
                    with using(vocab):
                        got = _trip_days(r)[0]
                    want = date(2026, 6, 1)
                else:
                    got, want = _trip_days(r)[0], date(2026, 5, 1)
                if got != want:
                    bad.append(got)

    ts = [threading.Thread(target=work, args=(i % 2 == 0,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad

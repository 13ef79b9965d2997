"""The concept catalogue: loaded from data, checked names, what rules read, the generated docs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from uac_kernel.rules.engine import rule
from uac_kernel.rules.library import (
    LIBRARY,
    drug_drug_interaction,
    food_drug_interaction,
    schengen_90_180,
)
from uac_kernel.rules.library._common import _get
from uac_kernel.state.fold import State
from uac_kernel.state.query import UserView
from uac_kernel.vocab import CONCEPTS, ROLES, Binding, Vocabulary, concept
from uac_kernel.vocab.catalogue import KINDS
from uac_kernel.vocab.reads import reads
from uac_kernel.vocab.resolve import fields_of, using

ROOT = Path(__file__).resolve().parents[2]


def test_every_concept_has_a_role_a_kind_and_a_meaning() -> None:
    assert ROLES and CONCEPTS
    for c in CONCEPTS.values():
        assert c.role in ROLES and c.value in KINDS and c.meaning.strip(), c.name
    for r in ROLES.values():
        assert r.meaning.strip() and (r.any or r.types), r.name


def test_a_concept_the_catalogue_lacks_is_an_error_not_a_field() -> None:
    with pytest.raises(KeyError, match=r"no concept 'trip\.strat'"):
        concept("trip.strat")


def test_a_plain_name_is_a_field_as_written_even_with_a_dot() -> None:
    # a field may be called "trip.start": only a Concept resolves through the vocabulary
    assert fields_of("Trip", "trip.start") == ("trip.start",)
    assert fields_of("Trip", concept("trip.start")) == ("start",)


def test_bindings_come_before_defaults_and_a_rejection_hides_a_default() -> None:
    v = Vocabulary(
        [
            Binding("trip.start", "Journey", "leaves_on", author="inferred", score=0.8),
            Binding("trip.start", "Journey", "begins", author="person"),
            Binding("trip.start", "Journey", "start", author="person", status="rejected"),
            Binding("trip.start", "Journey", "setoff", status="held", score=0.6),
            Binding("trip", "Journey"),
            Binding("trip", "Vacation", author="person", status="rejected"),
        ]
    )
    assert v.fields("Journey", "trip.start") == ("begins", "leaves_on")
    assert v.fields("Trip", "trip.start") == ("start",)
    assert v.types("trip") == ("Journey", "Trip", "Travel")
    assert [b.field for b in v.held()] == ["setoff"]


def test_a_later_binding_of_the_same_key_replaces_it() -> None:
    v = Vocabulary(
        [Binding("trip", "Outing"), Binding("trip", "Outing", author="person", status="rejected")]
    )
    assert "Outing" not in v.types("trip")


def test_a_user_rule_watching_a_role_runs_for_a_newly_bound_type() -> None:
    @rule(roles=["trip"])
    def trips(user: UserView):  # type: ignore[no-untyped-def]
        return []

    st = State("u")
    view = UserView(st)
    assert trips.watches(view) == frozenset({"Trip", "Vacation", "Travel"})
    st.bind([Binding("trip", "Journey")])
    assert "Journey" in (trips.watches(view) or ())


def test_the_resolver_reads_the_vocabulary_in_force() -> None:
    st = State("u")
    st.bind([Binding("trip.start", "Journey", "leaves_on")])

    class Rec:  # a stand-in record: _get reads __dict__ by the type's name
        pass

    Journey = type("Journey", (Rec,), {})
    j = Journey()
    j.__dict__.update({"leaves_on": "2026-05-01", "start": None})
    assert _get(j, concept("trip.start")) is None  # outside a run: the defaults
    with using(st.vocab):
        assert _get(j, concept("trip.start")) == "2026-05-01"


def test_reads_follows_helpers_and_roles_passed_as_data() -> None:
    assert {"medication", "supplement", "medication.name"} <= reads(drug_drug_interaction)
    assert {"meal", "meal.when"} <= reads(food_drug_interaction)
    assert all(reads(r) for r in LIBRARY)


def test_the_docs_concept_tables_are_current() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "concepts_doc.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr


def test_reads_takes_no_role_from_a_nested_functions_signature() -> None:
    # A helper's parameter named as a role, its annotations, and ``return`` are no reads; the
    # role the rule passes as data is. In both annotation modes (the future import folds them).
    src = """
def rule(state):
    def pick(trip: object, *rest: str, payment: str = "", **kw: int) -> bool:
        return True
    return [r for r in state.of_role("stay") if pick(r)]
"""
    for head in ("", "from __future__ import annotations\n"):
        ns: dict[str, Any] = {}
        exec(compile(head + src, "<rule>", "exec", dont_inherit=True), ns)
        assert reads(ns["rule"]) == {"stay"}
    assert "return" not in reads(schengen_90_180)

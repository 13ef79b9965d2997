"""The record types of a synthetic life: their fields, value pools and sentence templates."""

from __future__ import annotations

import functools
import random
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

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

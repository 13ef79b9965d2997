"""The demo's planted stories: trips (one cancelled, one corrected), the people in Maya's life, her
health, her home and work."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from uac_kernel.demo.timeline import (
    _HOSTILE_CODE,
    _TAX_PATH,
    DEMO_USER,
    _FieldValue,
    _fmt,
    _slug,
    _Timeline,
)


@dataclass(frozen=True)
class _Trip:
    key: str
    destination: str
    country: str
    start: str
    end: str
    purpose: str
    booked: str
    said: str
    companions: tuple[str, ...] = ()
    flight: tuple[str, str, str, str, str, str, int] | None = None  # out, back, from, to, deps, min
    booking: tuple[str, float] = ("Trainline", 90.0)
    local: tuple[str, float, tuple[str, ...]] | None = None  # currency, daily spend, merchants


_TRIPS = (
    _Trip(
        "trip-2024-02-edinburgh", "Edinburgh", "United Kingdom", "2024-02-23", "2024-02-25",
        "weekend away", "2024-02-01T20:30",
        "Booked a weekend in Edinburgh with Tom, {start} to {end}.",
        ("Tom Haworth",), booking=("LNER", 112.4),
    ),
    _Trip(
        "trip-2024-03-lisbon", "Lisbon", "Portugal", "2024-03-14", "2024-03-18", "holiday",
        "2024-02-12T21:05", "Lisbon is booked! Flying out {start}, back {end}, staying with Ana.",
        ("Ana Ferreira",), ("TP1331", "TP1330", "MAN", "LIS", "07:10", "19:05", 170),
        ("TAP Air Portugal", 214.0), ("EUR", 45.0, ("Time Out Market", "Pastéis de Belém")),
    ),
    _Trip(
        "trip-2024-05-london", "London", "United Kingdom", "2024-05-21", "2024-05-23",
        "conference", "2024-04-30T12:15",
        "Priya and I are going to the UX London conference, {start} to {end}.",
        ("Priya Shah",), booking=("Avanti West Coast", 96.5),
    ),
    _Trip(
        "trip-2024-07-lagos", "Lagos", "Nigeria", "2024-07-05", "2024-07-19", "family visit",
        "2024-05-10T19:40",
        "Going home to Lagos with Mum and Chidi from {start} to {end}, first time in five years!",
        ("Grace Okafor", "Chidi Okafor"), ("VS411", "VS412", "MAN", "LOS", "10:20", "22:50", 390),
        ("Virgin Atlantic", 868.0), ("NGN", 42000.0, ("Shoprite Lekki", "Terra Kulture")),
    ),
    _Trip(
        "trip-2024-08-lake-district", "Keswick", "United Kingdom", "2024-08-16", "2024-08-18",
        "hiking", "2024-07-28T18:20",
        "Hiking weekend in the Lake District with Tom and Sam, {start} to {end}.",
        ("Tom Haworth", "Sam O'Neill"), booking=("Keswick YHA", 138.0),
    ),
    _Trip(
        "trip-2024-10-copenhagen", "Copenhagen", "Denmark", "2024-10-08", "2024-10-11", "work",
        "2024-09-16T11:00", "Work trip: Copenhagen with Priya from {start} to {end}.",
        ("Priya Shah",), ("SK2548", "SK2547", "MAN", "CPH", "07:00", "18:40", 115),
        ("SAS", 246.0), ("DKK", 380.0, ("Torvehallerne", "Paludan Bogcafé")),
    ),
    _Trip(
        "trip-2024-12-birmingham", "Birmingham", "United Kingdom", "2024-12-23", "2024-12-27",
        "Christmas with family", "2024-11-30T10:30",
        "Christmas at Mum and Dad's in Birmingham, {start} to {end}.",
        booking=("Trainline", 48.2),
    ),
    _Trip(
        "trip-2025-02-reykjavik", "Reykjavik", "Iceland", "2025-02-14", "2025-02-18", "holiday",
        "2024-12-05T20:45", "Tom and I booked Reykjavik for {start} to {end}: northern lights!",
        ("Tom Haworth",), ("FI441", "FI440", "MAN", "KEF", "11:30", "07:40", 165),
        ("Icelandair", 412.0),
    ),
    _Trip(
        "trip-2025-03-zurich", "Zürich", "Switzerland", "2025-03-04", "2025-03-06",
        "job interview", "2025-02-20T19:10",
        "Flying to Zürich {start} to {end} for the final interview at Alpenlicht.",
        flight=("LX391", "LX390", "MAN", "ZRH", "06:50", "17:35", 110),
        booking=("SWISS", 289.0), local=("CHF", 70.0, ("Sprüngli", "Hiltl")),
    ),
    _Trip(
        "trip-2025-04-berlin", "Berlin", "Germany", "2025-04-25", "2025-04-28",
        "friend's wedding", "2025-03-02T16:40",
        "Ana's getting married in Berlin! I'm there {start} to {end}.",
        ("Ana Ferreira",), ("U21873", "U21874", "MAN", "BER", "08:15", "20:05", 120),
        ("easyJet", 158.0), ("EUR", 55.0, ("Markthalle Neun", "Mustafa's Gemüse Kebap")),
    ),
    _Trip(
        "trip-2025-07-lucerne", "Lucerne", "Switzerland", "2025-07-19", "2025-07-20",
        "weekend away", "2025-07-06T18:00",
        "Jonas and I are doing Lucerne and Mount Pilatus, {start} to {end}.",
        ("Jonas Müller",), booking=("SBB", 64.0),
    ),
    _Trip(
        "trip-2025-08-manchester", "Manchester", "United Kingdom", "2025-08-22", "2025-08-26",
        "visiting friends", "2025-07-14T21:30",
        "Back to Manchester {start} to {end} to see Tom and Sam.",
        flight=("LX390", "LX391", "ZRH", "MAN", "09:40", "18:30", 115),
        booking=("SWISS", 312.0), local=("GBP", 40.0, ("Rudy's Pizza", "Mackie Mayor")),
    ),
    _Trip(
        "trip-2025-09-lugano", "Lugano", "Switzerland", "2025-09-13", "2025-09-14",
        "weekend away", "2025-08-31T17:25",
        "Solo weekend in Lugano, {start} to {end}. Lake and gelato.",
        booking=("SBB", 88.0),
    ),
    _Trip(
        "trip-2025-10-tokyo", "Tokyo", "Japan", "2025-10-02", "2025-10-12", "holiday",
        "2025-07-01T20:00", "東京 here we come: Jonas and I fly out {start} and back {end}!",
        ("Jonas Müller",), ("LX160", "LX161", "ZRH", "HND", "13:05", "10:55", 815),
        ("SWISS", 1340.0), ("JPY", 9000.0, ("Ichiran Shibuya", "Tsutaya Daikanyama")),
    ),
    _Trip(
        "trip-2025-11-milan", "Milan", "Italy", "2025-11-21", "2025-11-23", "weekend away",
        "2025-10-30T19:50", "Meeting Ana in Milan {start} to {end}, going by train.",
        ("Ana Ferreira",), booking=("SBB", 96.0),
        local=("EUR", 50.0, ("Luini", "Pasticceria Marchesi")),
    ),
    _Trip(
        "trip-2025-12-birmingham", "Birmingham", "United Kingdom", "2025-12-20", "2025-12-28",
        "Christmas with family", "2025-10-26T11:45",
        "Flights home for Christmas: Birmingham {start} to {end}.",
        flight=("LX450", "LX451", "ZRH", "BHX", "12:10", "14:20", 105),
        booking=("SWISS", 365.0),
        local=("GBP", 35.0, ("Selfridges Birmingham", "Digbeth Dining Club")),
    ),
)  # fmt: skip


_CANCELLED = "trip-2025-02-reykjavik"


_TOKYO = "trip-2025-10-tokyo"


def _trips(tl: _Timeline) -> set[date]:
    """Book every trip (with flights, booking and local spending); return the days away."""
    away: set[date] = set()
    for trip in _TRIPS:
        first, last = tl.day(trip.start), tl.day(trip.end)
        if trip.key == _TOKYO:
            last = tl.day("2025-10-14")
        booked = tl.at(trip.booked)
        home_country = tl.home(first)[1]
        currency = tl.home(booked.date())[2]
        fields: dict[str, _FieldValue] = {
            "destination": trip.destination,
            "country": trip.country,
            "start": first,
            "end": tl.day(trip.end),
            "international": trip.country != home_country,
            "purpose": trip.purpose,
        }
        if trip.companions:
            fields["companions"] = list(trip.companions)
        said = trip.said.format(start=_fmt(first), end=_fmt(tl.day(trip.end)))
        tl.add(booked, "Trip", trip.key, fields, said)
        merchant, price = trip.booking
        tl.spend(booked + timedelta(minutes=4), price, currency, "travel", merchant)
        flights = _flights(tl, trip, booked + timedelta(minutes=2))
        if trip.key == _CANCELLED:
            when = tl.at("2025-01-20T12:10")
            reason = "cancelled: the airline dropped the route"
            tl.retract(
                when,
                "Trip",
                trip.key,
                reason,
                said="Bad news: Icelandair dropped our route, so Reykjavik is off. Refund coming.",
            )
            for key, start, end in flights:
                tl.retract(when + timedelta(minutes=1), "Flight", key, reason)
                tl.release(start, end)
            tl.spend(when + timedelta(days=6), -price, currency, "refund", merchant)
            continue
        away.update(first + timedelta(days=i) for i in range((last - first).days + 1))
        if trip.local:
            local_currency, daily, merchants = trip.local
            for i in range((last - first).days + 1):
                if tl.rng.random() < 0.6:
                    when = datetime.combine(first + timedelta(days=i), time(13 + i % 6, 5 * i % 60))
                    amount = daily * tl.rng.uniform(0.5, 1.6)
                    category = tl.rng.choice(("eating out", "travel", "shopping"))
                    tl.spend(when, amount, local_currency, category, tl.rng.choice(merchants))
    _tokyo_correction(tl)
    return away


def _flights(tl: _Timeline, trip: _Trip, ts: datetime) -> list[tuple[str, datetime, datetime]]:
    if trip.flight is None:
        return []
    out_no, back_no, origin, dest, dep_out, dep_back, minutes = trip.flight
    booked = []
    legs = (
        (out_no, origin, dest, trip.start, dep_out),
        (back_no, dest, origin, trip.end, dep_back),
    )
    for number, frm, to, iso_day, dep in legs:
        start = tl.at(f"{iso_day}T{dep}")
        key = f"flight-{start.date().isoformat()}-{frm.lower()}-{to.lower()}"
        fields: dict[str, _FieldValue] = {
            "title": f"{frm} → {to}",
            "flight_no": number,
            "from_airport": frm,
            "to_airport": to,
        }
        end = start + timedelta(minutes=minutes)
        if tl.commit(ts, "Flight", key, start, end, fields):
            booked.append((key, start, end))
    return booked


def _tokyo_correction(tl: _Timeline) -> None:
    ts = tl.at("2025-10-09T21:00")
    new_end = tl.day("2025-10-14")
    tl.update(
        ts,
        "Trip",
        _TOKYO,
        {"end": new_end},
        said=f"Loving 東京 so much that I've moved my flight home to {_fmt(new_end)}.",
    )
    old, new = tl.at("2025-10-12T10:55"), tl.at("2025-10-14T10:55")
    flight = timedelta(minutes=815)
    tl.release(old, old + flight)
    if not tl.reserve(new, new + flight):
        raise RuntimeError("demo generator bug: the moved Tokyo flight overlaps something")
    # the flight keeps the key of its original date; only its times change
    tl.update(
        ts + timedelta(minutes=1),
        "Flight",
        f"flight-{old.date().isoformat()}-hnd-zrh",
        {"start": new, "end": new + flight},
    )


_PEOPLE = (
    ("Grace Okafor", "mother", "1963-04-22", "Birmingham"),
    ("Emeka Okafor", "father", "1960-11-03", "Birmingham"),
    ("Chidi Okafor", "brother", "1994-08-09", "Leeds"),
    ("Ana Ferreira", "friend", "1990-12-01", "Lisbon"),
    ("Tom Haworth", "friend", "1989-07-17", "Manchester"),
    ("Sam O'Neill", "friend", "1991-02-28", "Manchester"),
    ("Priya Shah", "manager", "1985-05-30", "Manchester"),
)


def _onboarding(tl: _Timeline) -> None:
    """The first week: who Maya is, the people around her, her habits."""
    expires = tl.day("2026-02-19")
    tl.add(
        tl.at("2024-01-03T19:30"),
        "Passport",
        "passport-uk",
        {
            "holder": DEMO_USER,
            "number": "548213097",
            "country": "United Kingdom",
            "expires": expires,
            "blank_pages": 5,
        },
        f"My passport number is 548213097; it expires on {_fmt(expires, year=True)}.",
    )
    ts = tl.at("2024-01-04T20:00")
    for i, (name, relation, birthday, city) in enumerate(_PEOPLE):
        fields: dict[str, _FieldValue] = {
            "name": name,
            "relation": relation,
            "birthday": date.fromisoformat(birthday),
            "city": city,
        }
        said = ""
        if name == "Sam O'Neill":
            said = f"Sam O'Neill's new band is literally called \"{_HOSTILE_CODE}\". He loves it."
        elif relation in ("mother", "brother"):
            born = _fmt(date.fromisoformat(birthday))
            said = f"My {relation} {name.split()[0]} lives in {city}; birthday {born}."
        tl.add(ts + timedelta(minutes=3 * i), "Person", f"person-{_slug(name)}", fields, said)
    tl.add(
        tl.at("2024-01-05T08:10"),
        "FoodHabit",
        "habit-oat-flat-white",
        {"item": "oat flat white", "frequency": "daily", "since": tl.day("2022-06-01")},
        "I can't start the day without an oat flat white.",
    )
    tl.add(
        tl.at("2024-01-05T08:12"),
        "FoodHabit",
        "habit-weekday-vegetarian",
        {"item": "vegetarian on weekdays", "frequency": "weekdays", "since": tl.day("2023-01-01")},
        "I eat vegetarian Monday to Friday.",
    )
    tl.update(
        tl.at("2025-01-12T17:00"),
        "Person",
        "person-chidi-okafor",
        {"city": "London"},
        "Chidi has moved to London for his new job.",
    )
    tl.add(
        tl.at("2025-03-18T18:05"),
        "Person",
        "person-lena-brunner",
        {
            "name": "Lena Brunner",
            "relation": "manager",
            "birthday": date(1986, 9, 12),
            "city": "Zürich",
        },
    )
    tl.add(
        tl.at("2025-06-20T18:40"),
        "Person",
        "person-noemi-keller",
        {
            "name": "Noemi Keller",
            "relation": "colleague",
            "birthday": date(1993, 3, 7),
            "city": "Zürich",
        },
        "Noemi from the research team showed me the best Älplermagronen in town.",
    )
    tl.add(
        tl.at("2025-06-28T21:10"),
        "Person",
        "person-jonas-muller",
        {
            "name": "Jonas Müller",
            "relation": "friend",
            "birthday": date(1992, 1, 15),
            "city": "Zürich",
        },
        "Met Jonas Müller at the climbing gym; he's promised to teach me to lead climb.",
    )


def _health(tl: _Timeline) -> None:
    med = "Medication"
    tl.add(
        tl.at("2024-01-04T19:40"),
        "Condition",
        "cond-asthma",
        {"name": "asthma", "since": tl.day("1998-06-01"), "severity": "mild"},
        "I have mild asthma, since I was a kid.",
    )
    tl.add(
        tl.at("2024-01-04T19:42"),
        med,
        "med-salbutamol",
        {
            "name": "salbutamol inhaler",
            "dose_mg": 0.1,
            "start": tl.day("2015-03-01"),
            "active": True,
            "times_per_day": 2,
            "prescribed_by": "Dr Helen Marsh",
        },
        "I use a salbutamol inhaler, 100 micrograms, up to twice a day.",
    )
    # story 1: penicillin allergy, then amoxicillin nine months later
    tl.add(
        tl.at("2024-02-09T20:15"),
        "Allergy",
        "allergy-penicillin",
        {
            "substance": "penicillin",
            "severity": "severe",
            "reaction": "hives and lip swelling",
            "noted": tl.day("2024-02-09"),
        },
        "The GP asked about allergies: I'm allergic to penicillin. As a kid I came out in "
        "hives and my lips swelled up.",
    )
    for year in ("2024", "2025"):
        key = f"med-{year}-cetirizine"
        tl.add(
            tl.at(f"{year}-03-28T09:00"),
            med,
            key,
            {
                "name": "cetirizine",
                "dose_mg": 10.0,
                "start": tl.day(f"{year}-03-28"),
                "active": True,
                "times_per_day": 1,
                "prescribed_by": "pharmacy",
            },
            "Hay fever season again. Back on cetirizine, 10 mg a day.",
        )
        tl.update(
            tl.at(f"{year}-08-01T09:00"),
            med,
            key,
            {"active": False, "end": tl.day(f"{year}-07-31")},
        )
    tl.add(
        tl.at("2024-03-28T09:02"),
        "Allergy",
        "allergy-birch-pollen",
        {
            "substance": "birch pollen",
            "severity": "mild",
            "reaction": "hay fever",
            "noted": tl.day("2024-03-28"),
        },
    )
    # story 2: high cholesterol, atorvastatin, later grapefruit juice
    tl.add(
        tl.at("2024-08-20T12:30"),
        "Condition",
        "cond-high-cholesterol",
        {"name": "high cholesterol", "since": tl.day("2024-08-20"), "severity": "moderate"},
        "Blood test results: my LDL cholesterol is high. The GP says it runs in the family.",
    )
    tl.add(
        tl.at("2024-09-02T08:30"),
        med,
        "med-atorvastatin",
        {
            "name": "atorvastatin",
            "dose_mg": 10.0,
            "start": tl.day("2024-09-02"),
            "active": True,
            "times_per_day": 1,
            "prescribed_by": "Dr Helen Marsh",
        },
        "Started atorvastatin today, 10 mg every evening.",
    )
    tl.add(
        tl.at("2025-01-06T07:45"),
        "FoodHabit",
        "habit-grapefruit-juice",
        {"item": "grapefruit juice", "frequency": "most mornings", "since": tl.day("2025-01-06")},
        "New year, new me: a big glass of grapefruit juice with breakfast most mornings.",
    )
    tl.update(
        tl.at("2025-03-10T12:00"),
        med,
        "med-atorvastatin",
        {"dose_mg": 20.0},
        "The GP doubled my atorvastatin to 20 mg; the cholesterol hasn't come down enough.",
    )
    tl.add(
        tl.at("2024-11-18T19:00"),
        "Condition",
        "cond-chest-infection",
        {"name": "chest infection", "since": tl.day("2024-11-15"), "severity": "moderate"},
    )
    tl.add(
        tl.at("2024-11-18T19:05"),
        med,
        "med-2024-11-amoxicillin",
        {
            "name": "amoxicillin",
            "dose_mg": 500.0,
            "start": tl.day("2024-11-18"),
            "end": tl.day("2024-11-25"),
            "active": True,
            "times_per_day": 3,
            "prescribed_by": "walk-in centre",
        },
        "The walk-in centre gave me amoxicillin for my chest infection: 500 mg three times a "
        "day for a week.",
    )
    tl.update(
        tl.at("2024-11-25T21:00"),
        med,
        "med-2024-11-amoxicillin",
        {"active": False},
        "Finished the antibiotics today.",
    )
    tl.update(
        tl.at("2024-11-29T18:30"),
        "Condition",
        "cond-chest-infection",
        {"resolved": True},
        "Chest feels clear again, the infection is gone.",
    )


def _home_and_work(tl: _Timeline) -> None:
    tl.add(
        tl.at("2024-01-02T20:10"),
        "Residence",
        "residence-manchester",
        {"city": "Manchester", "country": "United Kingdom", "since": tl.day("2021-09-01")},
        f"Hi! I'm Maya Okafor. I've lived in Manchester, in Ancoats, since "
        f"{_fmt(tl.day('2021-09-01'), year=True)}.",
    )
    tl.add(
        tl.at("2024-01-02T20:12"),
        "Job",
        "job-northwind",
        {"employer": "Northwind Health", "role": "UX researcher", "since": tl.day("2021-10-04")},
        "I work as a UX researcher at Northwind Health.",
    )
    tl.update(
        tl.at("2024-09-02T18:00"),
        "Job",
        "job-northwind",
        {"role": "senior UX researcher"},
        "Promoted to senior UX researcher today!",
    )
    tl.add(
        tl.at("2025-03-18T18:00"),
        "Job",
        "job-alpenlicht",
        {"employer": "Alpenlicht AG", "role": "lead UX researcher", "since": tl.day("2025-06-16")},
        f"I said yes! Lead UX researcher at Alpenlicht AG in Zürich, starting "
        f"{_fmt(tl.day('2025-06-16'))}. My manager will be Lena Brunner.",
    )
    tl.update(
        tl.at("2025-05-23T18:00"),
        "Job",
        "job-northwind",
        {"until": tl.day("2025-05-23")},
        "Last day at Northwind today. Cake, speeches, tears.",
    )
    tl.retract(
        tl.at("2025-05-23T18:01"), "Job", "job-northwind", "left Northwind for a job in Zürich"
    )
    tl.spend(tl.at("2025-05-28T10:00"), 2380.0, "GBP", "moving", "Britannia Movers")
    moved = tl.at("2025-06-01T10:00")
    tl.update(
        moved,
        "Residence",
        "residence-manchester",
        {"until": tl.day("2025-05-31")},
        f"Officially moved: I live in Zürich now, since {_fmt(tl.move)}. Goodbye Manchester!",
    )
    tl.retract(moved + timedelta(minutes=1), "Residence", "residence-manchester", "moved to Zürich")
    tl.add(
        moved + timedelta(minutes=2),
        "Residence",
        "residence-zurich",
        {"city": "Zürich", "country": "Switzerland", "since": tl.day("2025-06-01")},
    )
    tl.add(
        tl.at("2024-12-02T19:00"),
        "Task",
        "task-2024-tax-return",
        {
            "title": "File self-assessment tax return",
            "due": tl.day("2025-01-31"),
            "done": False,
            "notes": f"receipts in {_TAX_PATH}",
        },
        f"Reminder to self: tax return due {_fmt(tl.day('2025-01-31'))}. Receipts are in "
        f"{_TAX_PATH}.",
    )
    tl.update(
        tl.at("2025-01-26T16:20"),
        "Task",
        "task-2024-tax-return",
        {"done": True},
        "Tax return filed. Never leaving it this late again.",
    )
    tl.add(
        tl.at("2025-06-02T08:30"),
        "Task",
        "task-zurich-registration",
        {"title": "Register at the Kreisbüro", "due": tl.day("2025-06-14"), "done": False},
        "I have to register at the Kreisbüro within 14 days of moving.",
    )
    tl.update(tl.at("2025-06-03T11:00"), "Task", "task-zurich-registration", {"done": True})
    # the passport fills up
    tl.update(tl.at("2024-07-20T12:00"), "Passport", "passport-uk", {"blank_pages": 4})
    tl.update(
        tl.at("2025-10-15T19:00"),
        "Passport",
        "passport-uk",
        {"blank_pages": 3},
        "Two more stamps from Japan. Only 3 blank pages left in my passport.",
    )
    # a meal worth remembering
    tl.add(
        tl.at("2024-12-25T21:00"),
        "Meal",
        f"meal-{tl.day('2024-12-25').isoformat()}-dinner",
        {
            "name": 'Mum\'s "famous" jollof',
            "date": tl.day("2024-12-25"),
            "meal": "dinner",
            "home_cooked": True,
            "with_people": ["Grace Okafor", "Emeka Okafor", "Chidi Okafor"],
        },
        'Mum made her "famous" jollof for Christmas dinner. Still the best.',
    )

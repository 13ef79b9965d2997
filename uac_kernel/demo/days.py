"""The demo's days: fixed appointments and the seeded routine of groceries, small spends, workouts,
meals, sleep and meetings."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from uac_kernel.demo.timeline import _FieldValue, _fmt, _money, _Timeline


def _fixed_appointments(tl: _Timeline) -> None:
    def book(slug: str, title: str, ts: str, start: str, minutes: int, where: str) -> datetime:
        begin = tl.at(start)
        key = f"appt-{begin.date().isoformat()}-{slug}"
        fields: dict[str, _FieldValue] = {"title": title, "location": where}
        tl.commit(tl.at(ts), "Appointment", key, begin, begin + timedelta(minutes=minutes), fields)
        return begin

    def said(ts: str, text: str) -> None:
        tl.say(tl.at(ts), text)

    gp, dentist = "Ancoats Medical Practice", "Deansgate Dental"
    book("gp", "GP check-up", "2024-02-02T09:00", "2024-02-09T10:00", 20, gp)
    book("dentist", "Dentist check-up", "2024-04-02T12:00", "2024-04-16T09:00", 45, dentist)
    said("2024-07-30T09:10", f"Booked a blood test for {_fmt(tl.day('2024-08-06'))}, 8:30.")
    book("blood-test", "Blood test", "2024-07-30T09:10", "2024-08-06T08:30", 15, gp)
    book("gp", "GP: blood test results", "2024-08-07T10:00", "2024-08-20T11:00", 15, gp)
    book("dentist", "Dentist check-up", "2024-10-01T12:30", "2024-10-15T09:00", 45, dentist)
    said("2024-11-18T16:00", "Can't shake this cough, going to the walk-in centre tonight.")
    book(
        "walk-in",
        "Walk-in centre",
        "2024-11-18T16:00",
        "2024-11-18T17:30",
        45,
        "Manchester Walk-in Centre",
    )
    book("gp", "GP: cholesterol review", "2025-02-24T09:00", "2025-03-10T10:30", 20, gp)
    # story 4: the dentist at 14:00 and the design review at 14:30 on the same day
    said("2025-03-25T13:00", f"Dentist check-up booked for {_fmt(tl.day('2025-04-15'))} at 2pm.")
    book("dentist", "Dentist check-up", "2025-03-25T13:00", "2025-04-15T14:00", 45, dentist)
    review = tl.at("2025-04-15T14:30")
    tl.commit(
        tl.at("2025-04-11T16:45"),
        "Meeting",
        f"mtg-{review.date().isoformat()}-design-review",
        review,
        review + timedelta(hours=1),
        {
            "title": "Design review: onboarding flow",
            "attendees": ["Priya Shah", "Design team"],
            "remote": False,
        },
        f"Priya moved the design review to {_fmt(review.date())}, 14:30 to 15:30.",
        may_overlap=True,
    )
    said("2025-05-30T10:00", f"Kreisbüro registration on {_fmt(tl.day('2025-06-03'))}, 9:30.")
    book(
        "kreisbuero",
        "Kreisbüro registration",
        "2025-05-30T10:00",
        "2025-06-03T09:30",
        30,
        "Kreisbüro 7",
    )
    book(
        "gp",
        "Hausarzt: first visit",
        "2025-06-12T14:00",
        "2025-06-24T08:15",
        30,
        "Praxis Hottingen",
    )
    book(
        "dentist",
        "Dentist check-up",
        "2025-10-20T10:00",
        "2025-10-21T08:30",
        45,
        "Zahnarztpraxis Kreis 7",
    )


def _routine(tl: _Timeline, away: set[date]) -> None:
    """Day-by-day life: money, workouts, meals, sleep, meetings, haircuts."""
    rng = tl.rng
    job_ends, job_starts = tl.day("2025-05-23"), tl.day("2025-06-16")
    gym_cancelled, climbing_from = tl.day("2025-05-01"), tl.day("2025-06-10")
    netflix_rise, duplicate_day = tl.day("2024-10-14"), tl.day("2024-06-15")
    last_haircut = tl.start - timedelta(days=42)
    for i in range(tl.days):
        d = tl.start + timedelta(days=i)
        city, _country, cur = tl.home(d)
        zurich = city == "Zürich"
        here = d not in away
        at = datetime.combine

        # fixed monthly money
        if d.day == 1:
            rent = 2450.0 if zurich else 1150.0
            tl.spend(
                at(d, time(7, 0)),
                rent,
                cur,
                "rent",
                "Immobilien Seefeld AG" if zurich else "Northern Lettings",
            )
            if not zurich and d <= gym_cancelled:
                tl.spend(at(d, time(7, 5)), 34.0, cur, "subscriptions", "PureGym Manchester")
        if d.day == 20:
            bill = rng.uniform(70, 120) if zurich else rng.uniform(55, 110)
            utility = "ewz" if zurich else "Octopus Energy"
            tl.spend(at(d, time(7, 0)), bill, cur, "utilities", utility)
        if d.day == 14:
            price = 18.9 if d >= tl.move else (12.99 if d >= netflix_rise else 10.99)
            tl.spend(
                at(d, time(6, 30)),
                price,
                "CHF" if d >= tl.move else "GBP",
                "subscriptions",
                "Netflix",
            )
        if d.day == 10 and d >= climbing_from:
            tl.spend(at(d, time(6, 45)), 89.0, "CHF", "subscriptions", "Kletterhalle Limmat")
        if d in (tl.day("2024-04-12"), tl.day("2025-04-12")):
            tl.spend(at(d, time(8, 1)), 89.99, "GBP", "subscriptions", "Cloud storage 2 TB")
        if d == tl.day("2025-03-20"):
            tl.spend(at(d, time(20, 31)), 59.99, "GBP", "subscriptions", "Duolingo Super")

        if here:
            _groceries(tl, d, cur, zurich, duplicate_day)
            _little_spends(tl, d, cur, zurich)
            _workout(tl, d, zurich, second_year=i >= 365)
            _meal(tl, d, cur, zurich)
            if d.weekday() == 5 and (d - last_haircut).days >= 49:
                begin = at(d, time(11, 0))
                salon = "Coiffeur Enge" if zurich else "Hair by Nneka"
                booked = tl.not_before_start(at(d - timedelta(days=8), time(12, 30)))
                if tl.commit(
                    booked,
                    "Appointment",
                    f"appt-{d.isoformat()}-haircut",
                    begin,
                    begin + timedelta(hours=1),
                    {"title": "Haircut", "location": salon},
                ):
                    last_haircut = d
            employed = d <= job_ends or d >= job_starts
            if employed and d.weekday() < 5:
                _meetings(tl, d, zurich)
        if d.weekday() == 6:
            _sleep(tl, d)


def _groceries(tl: _Timeline, d: date, cur: str, zurich: bool, duplicate_day: date) -> None:
    if d.weekday() != 5:
        return
    rng = tl.rng
    shops = ("Migros", "Coop", "Denner") if zurich else ("Tesco", "Co-op", "Sainsbury's")
    amount = rng.uniform(85, 160) if zurich else rng.uniform(38, 78)
    when = datetime.combine(d, time(10, rng.randrange(0, 60)))
    merchant = rng.choice(shops)
    said = ""
    if d == tl.day("2024-03-09"):
        said = "Shopping list for today:\noat milk, eggs, plantain, scotch bonnets"
    elif rng.random() < 0.06:
        said = f"Weekly shop at {merchant}: {_money(round(amount, 2), cur)}."
    tx = tl.spend(when, amount, cur, "groceries", merchant, said)
    if d == duplicate_day:
        twin = tl.spend(when + timedelta(minutes=2), amount, cur, "groceries", merchant)
        twin.duplicate_of = tx


def _little_spends(tl: _Timeline, d: date, cur: str, zurich: bool) -> None:
    rng = tl.rng
    if rng.random() < 0.07:
        cafes = (
            ("Café Henrici", "Sprüngli", "Café Schöne Aussicht")
            if zurich
            else ("Ancoats Coffee Co.", "Pot Kettle Black", "Foundation Coffee House")
        )
        amount = rng.uniform(5.2, 7.8) if zurich else rng.uniform(3.1, 4.9)
        merchant = rng.choice(cafes)
        treat = f"Treated myself to a coffee at {merchant}, {_money(round(amount, 2), cur)}."
        said = treat if rng.random() < 0.1 else ""
        tl.spend(
            datetime.combine(d, time(8, rng.randrange(0, 60))),
            amount,
            cur,
            "coffee",
            merchant,
            said,
        )
    if rng.random() < 0.035:
        amount = rng.uniform(4.4, 32.0) if zurich else rng.uniform(2.0, 24.0)
        merchant = rng.choice(("SBB", "ZVV")) if zurich else rng.choice(("Bee Network", "Northern"))
        tl.spend(
            datetime.combine(d, time(17, rng.randrange(0, 60))), amount, cur, "transport", merchant
        )


_KINDS_MANCHESTER = (("run", 45), ("yoga", 25), ("swim", 15), ("cycle", 15))


_KINDS_ZURICH = (("run", 35), ("climbing", 30), ("swim", 15), ("cycle", 10), ("hike", 10))


_KM_PER_MINUTE = {
    "run": (1 / 6.6, 1 / 5.1),
    "swim": (0.025, 0.04),
    "cycle": (0.28, 0.38),
    "hike": (0.05, 0.07),
}


def _workout(tl: _Timeline, d: date, zurich: bool, *, second_year: bool) -> None:
    rng = tl.rng
    if rng.random() >= (0.3 if second_year else 0.2):
        return
    table = _KINDS_ZURICH if zurich else _KINDS_MANCHESTER
    kind = rng.choices([k for k, _ in table], weights=[w for _, w in table])[0]
    if kind == "hike" and d.weekday() < 5:
        kind = "run"
    minutes = {
        "run": rng.randint(25, 65),
        "yoga": rng.randint(30, 75),
        "swim": rng.randint(30, 55),
        "cycle": rng.randint(40, 120),
        "climbing": rng.randint(60, 150),
        "hike": rng.randint(150, 330),
    }[kind]
    fields: dict[str, _FieldValue] = {"kind": kind, "minutes": minutes, "date": d}
    said = ""
    if kind in _KM_PER_MINUTE:
        lo, hi = _KM_PER_MINUTE[kind]
        km = round(minutes * rng.uniform(lo, hi), 1)
        fields["distance_km"] = km
        if rng.random() < 0.08:
            said = rng.choice(
                (
                    f"{kind.capitalize()}: {km} km in {minutes} minutes.",
                    f"Did a {km} km {kind} this evening, {minutes} min.",
                )
            )
    elif rng.random() < 0.08:
        said = f"{minutes} minutes of {kind} tonight. Feeling great."
    ts = datetime.combine(d, time(19, rng.randrange(0, 60)))
    tl.add(ts, "Workout", f"workout-{d.isoformat()}", fields, said)


_COOKED = (
    "jollof rice",
    "egusi soup",
    "shakshuka",
    "dal and rice",
    "veggie chilli",
    "mushroom risotto",
    "pasta al pomodoro",
    "plantain and beans",
)


_OUT_MANCHESTER = (
    ("ramen", "Ancoats Noodle Bar"),
    ("pizza", "Rudy's Pizza"),
    ("Sunday roast", "The Marble Arch"),
    ("dim sum", "Glamorous"),
    ("street food", "Mackie Mayor"),
)


_OUT_ZURICH = (
    ("Zürcher Geschnetzeltes", "Zeughauskeller"),
    ("fondue", "Le Dézaley"),
    ("rösti", "Bauschänzli"),
    ("vegetarian buffet", "Hiltl"),
    ("Älplermagronen", "Alpenrose"),
)


_ZURICH_FRIENDS = (("Noemi Keller", "2025-06-20"), ("Jonas Müller", "2025-06-28"))


def _meal(tl: _Timeline, d: date, cur: str, zurich: bool) -> None:
    rng = tl.rng
    if rng.random() >= 0.1:
        return
    friends: tuple[str, ...] = ("Tom Haworth", "Sam O'Neill")
    if zurich:
        friends = tuple(name for name, met in _ZURICH_FRIENDS if d >= tl.day(met))
    fields: dict[str, _FieldValue] = {"date": d, "meal": "dinner"}
    with_people = [f for f in friends if rng.random() < 0.3]
    ts = datetime.combine(d, time(21, rng.randrange(0, 60)))
    if rng.random() < 0.55:
        name = rng.choice(_COOKED)
        fields.update(name=name, home_cooked=True)
        said = f"Cooked {name} tonight."
    else:
        name, place = rng.choice(_OUT_ZURICH if zurich else _OUT_MANCHESTER)
        fields.update(name=name, home_cooked=False, place=place)
        said = f"Dinner out: {name} at {place}."
        amount = rng.uniform(28, 70) if zurich else rng.uniform(14, 38)
        tl.spend(
            ts - timedelta(minutes=40),
            amount * (1 + len(with_people) * 0.2),
            cur,
            "eating out",
            place,
        )
    if with_people:
        fields["with_people"] = with_people
        said = said[:-1] + " with " + " and ".join(p.split()[0] for p in with_people) + "."
    tl.add(ts, "Meal", f"meal-{d.isoformat()}-dinner", fields, said if rng.random() < 0.15 else "")


def _sleep(tl: _Timeline, d: date) -> None:
    rng = tl.rng
    moving = tl.day("2025-05-15") <= d <= tl.day("2025-06-15")
    hours = round(min(9.5, max(4.5, rng.gauss(6.2 if moving else 7.2, 0.6))), 1)
    quality = max(1, min(5, round((hours - 4.0) * 1.2 + rng.uniform(-0.8, 0.8))))
    said = ""
    if moving and hours < 6.5 and rng.random() < 0.7:
        said = f"Barely sleeping with the move: {hours} hours last night."
    elif rng.random() < 0.05:
        said = f"Slept {hours} hours, {'great' if quality >= 4 else 'meh'}."
    fields: dict[str, _FieldValue] = {"date": d, "hours": hours, "quality": quality}
    tl.add(datetime.combine(d, time(8, 30)), "SleepLog", f"sleep-{d.isoformat()}", fields, said)


def _meetings(tl: _Timeline, d: date, zurich: bool) -> None:
    manager = "Lena Brunner" if zurich else "Priya Shah"
    team = "Research guild" if zurich else "Product team"
    week = (d - _monday(tl.start)).days // 7
    plans: list[tuple[str, str, time, int, list[str], bool]] = []
    if d.weekday() == 1 and week % 3 == 0:
        plans.append(("1on1", f"1:1 with {manager.split()[0]}", time(10, 0), 30, [manager], False))
    if d.weekday() == 3 and d.day <= 7:
        plans.append(("readout", "Research readout", time(15, 0), 60, [manager, team], True))
    for slug, title, begins, minutes, attendees, remote in plans:
        start = datetime.combine(d, begins)
        ts = tl.not_before_start(start - timedelta(days=6, hours=1))
        fields: dict[str, _FieldValue] = {"title": title, "attendees": attendees, "remote": remote}
        tl.commit(
            ts,
            "Meeting",
            f"mtg-{d.isoformat()}-{slug}",
            start,
            start + timedelta(minutes=minutes),
            fields,
        )


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())

"""The seeded synthetic demo user: two years in the life of Maya Okafor, as Event JSONL.

Maya is a UX researcher, born 1991, British with Nigerian parents (Grace and Emeka, in
Birmingham; brother Chidi). For the first seventeen months she lives in Manchester and works
at Northwind Health; in spring 2025 she takes a job at Alpenlicht AG and moves to Zürich.
She travels (16 trips booked, 15 taken, 9 of them abroad), runs, swims and later
climbs, reads, cooks, has mild asthma and, from mid-2024, high cholesterol. Money is in GBP
before the move and CHF after it, and in the local currency abroad. A `Transaction.amount`
is money spent (positive); the one refund is negative.

Most of the history is benign routine (groceries, rent, coffee, meetings, workouts, sleep,
meals). A few stories are planted for rules and demos. Dates below are for the default
`start=date(2024, 1, 1)`; another `start` shifts every date by the same number of days. A
shorter `days` cuts the history off and a longer one extends the routine; the closing return
window (story 5) always sits at the end, whatever `days` is.

Planted stories (type, key, when):

1. Allergy vs. prescription. `Allergy` `allergy-penicillin` (severe) is recorded on
   2024-02-09, after a GP check-up. On 2024-11-18, about nine months later, a walk-in centre
   prescribes `Medication` `med-2024-11-amoxicillin` (a penicillin, 500 mg three times a day,
   2024-11-18 to 2024-11-25, `active` true; updated to `active` false on 2024-11-25).
2. Statin and grapefruit. `Medication` `med-atorvastatin` starts 2024-09-02 at 10 mg after
   `Condition` `cond-high-cholesterol` (2024-08-20); on 2025-03-10 an `update` raises
   `dose_mg` to 20.0. On 2025-01-06 `FoodHabit` `habit-grapefruit-juice` ("grapefruit
   juice", most mornings) is added; both stay current to the end.
3. Passport validity. `Passport` `passport-uk` (recorded 2024-01-03) expires 2026-02-19.
   `Trip` `trip-2025-10-tokyo` (Japan, international) runs 2025-10-02 to 2025-10-12, and an
   `update` on 2025-10-09 corrects its `end` to 2025-10-14 (the return `Flight`
   `flight-2025-10-12-hnd-zrh` keeps its key and gets the new times). The expiry is about
   four months after the trip; `trip-2025-12-birmingham` (2025-12-20 to 2025-12-28) also
   ends within six months of it.
4. Double booking. On Tuesday 2025-04-15 `Appointment` `appt-2025-04-15-dentist`
   (14:00-14:45) overlaps `Meeting` `mtg-2025-04-15-design-review` (14:30-15:30). It is the
   only overlapping pair of commitments (Appointment, Meeting, Flight) in the history.
5. Closing return window. `Purchase` `purchase-2025-12-noise-cancelling-headphones` is
   bought 27 days before the last day of the history (2025-12-03) with `return_by` 30 days
   later (2026-01-02, three days after the last day, 2025-12-30). No other deadline falls
   that close to the end.
6. The move. `Residence` `residence-manchester` (since 2021-09-01) gets an `update` with
   `until` 2025-05-31 and is then retracted ("moved to Zürich") on 2025-06-01, when
   `residence-zurich` is added: exactly one current Residence at the end. `Job`
   `job-northwind` ends the same way on 2025-05-23; `job-alpenlicht` is added 2025-03-18.
7. Corrections. `trip-2025-02-reykjavik` (booked 2024-12-05) and its two flights are
   retracted on 2025-01-20 ("cancelled: the airline dropped the route"), with a refund
   transaction. The groceries of Saturday 2024-06-15 are entered twice; the second
   transaction is retracted the next day ("entered twice"). `Subscription` `sub-netflix`
   goes from 10.99 to 12.99 GBP on 2024-09-25 and becomes 18.9 CHF after the move;
   `sub-gym-manchester` is updated to `cancelled` true on 2025-05-20.

Utterances (`kind` "utterance", `speaker` "user") state what the facts beside them state and
include awkward strings on purpose: double quotes, a Windows path with backslashes, a
newline, "Zürich", "東京" and a code-like `"); import os; os.system('x') #`.

Keys are readable slugs. Those of the planted records above (trips, medications, tasks, ...)
are fixed; keys that name a day (transactions aside: flights, appointments, meetings, meals,
workouts, sleep logs, purchases) use the actual, shifted date.

Fact events carry stable sources "demo-fact-0001", ...; utterances carry "chat-<date>#<n>".
The same arguments always give the same events (nothing reads the clock).
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from uac_kernel.core.outputs import JSONL, Output
from uac_kernel.demo.days import _fixed_appointments, _routine
from uac_kernel.demo.spending import _books, _purchases, _subscriptions
from uac_kernel.demo.stories import _health, _home_and_work, _onboarding, _trips
from uac_kernel.demo.timeline import _DEFAULT_START, _Timeline

__all__ = ["demo_events", "demo_jsonl", "write_demo_jsonl"]


def demo_events(
    seed: int = 7, start: date = _DEFAULT_START, days: int = 730
) -> list[dict[str, object]]:
    """The demo user's history as Event JSONL objects (DESIGN.md format), in ts order.

    `seed` varies the routine (amounts, workouts, meals, which turns are chatted about);
    the planted stories of the module docstring do not depend on it. Every `ts` lies in
    `[start, start + days)`.
    """
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}; the default is 730 (two years)")
    tl = _Timeline(seed, start, days)
    away = _trips(tl)
    _onboarding(tl)
    _health(tl)
    _home_and_work(tl)
    _subscriptions(tl)
    _purchases(tl)
    _books(tl)
    _fixed_appointments(tl)
    _routine(tl, away)
    return tl.events()


def demo_jsonl(seed: int = 7) -> list[str]:
    """demo_events() as the lines of its JSONL file."""
    return [json.dumps(event, ensure_ascii=False) + "\n" for event in demo_events(seed)]


def write_demo_jsonl(path: Path, seed: int = 7) -> int:
    """Write demo_events() one JSON object per line; return the number of lines."""
    lines = demo_jsonl(seed)
    Output(path, JSONL).write_text(lines)
    return len(lines)


# --------------------------------------------------------------------------- the timeline


# --------------------------------------------------------------------------- travel


# --------------------------------------------------------------------------- people and health


# --------------------------------------------------------------------------- money


# --------------------------------------------------------------------------- scheduling

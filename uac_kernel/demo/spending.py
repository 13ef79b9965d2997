"""The demo's money: subscriptions, purchases with warranties, and books."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from uac_kernel.demo.timeline import _FieldValue, _fmt, _money, _slug, _Timeline, _years_later


def _subscriptions(tl: _Timeline) -> None:
    sub = "Subscription"
    tl.add(
        tl.at("2024-01-05T21:00"),
        sub,
        "sub-netflix",
        {
            "name": "Netflix",
            "price": 10.99,
            "currency": "GBP",
            "period": "monthly",
            "billing_day": 14,
        },
        "I pay £10.99 a month for Netflix.",
    )
    tl.add(
        tl.at("2024-01-05T21:02"),
        sub,
        "sub-gym-manchester",
        {
            "name": "PureGym Manchester",
            "price": 34.0,
            "currency": "GBP",
            "period": "monthly",
            "billing_day": 1,
        },
    )
    tl.add(
        tl.at("2024-01-05T21:04"),
        sub,
        "sub-cloud-storage",
        {
            "name": "Cloud storage 2 TB",
            "price": 89.99,
            "currency": "GBP",
            "period": "yearly",
            "renews_on": tl.day("2024-04-12"),
        },
        f"Cloud storage is £89.99 a year; it renews on {_fmt(tl.day('2024-04-12'))}.",
    )
    tl.update(
        tl.at("2024-09-25T20:00"),
        sub,
        "sub-netflix",
        {"price": 12.99},
        "Netflix is going up to £12.99 a month. Grr.",
    )
    for renewed, next_time in (("2024-04-12", "2025-04-12"), ("2025-04-12", "2026-04-12")):
        when = tl.at(f"{renewed}T08:00")
        tl.update(when, sub, "sub-cloud-storage", {"renews_on": tl.day(next_time)})
    tl.add(
        tl.at("2025-03-20T20:30"),
        sub,
        "sub-duolingo",
        {
            "name": "Duolingo Super",
            "price": 59.99,
            "currency": "GBP",
            "period": "yearly",
            "renews_on": tl.day("2026-03-20"),
        },
        "Paid for a year of Duolingo, time to learn German properly.",
    )
    tl.update(
        tl.at("2025-05-20T19:00"),
        sub,
        "sub-gym-manchester",
        {"cancelled": True},
        f"Cancelled my PureGym membership; the last payment was on {_fmt(tl.day('2025-05-01'))}.",
    )
    tl.update(
        tl.at("2025-06-05T20:00"),
        sub,
        "sub-netflix",
        {"price": 18.9, "currency": "CHF"},
        "Netflix switched me to Swiss pricing: CHF 18.90 a month.",
    )
    tl.add(
        tl.at("2025-06-10T19:00"),
        sub,
        "sub-climbing-zurich",
        {
            "name": "Kletterhalle Limmat",
            "price": 89.0,
            "currency": "CHF",
            "period": "monthly",
            "billing_day": 10,
        },
        "Joined the Kletterhalle Limmat climbing gym, CHF 89 a month.",
    )


_PURCHASES = (
    ("2024-01-13", "running shoes", "Runners Need", 120.0, 30, 0),
    ("2024-03-02", "e-reader", "Currys", 149.99, 30, 2),
    ("2024-09-14", "standing desk", "IKEA", 289.0, 365, 5),
    ("2025-06-14", "commuter bike", "Velo Zürich", 1150.0, 14, 2),
    ("2025-07-05", "espresso machine", "Galaxus", 399.0, 14, 2),
    ("2025-09-06", "hiking boots", "Transa", 229.0, 30, 0),
    ("2025-10-25", "winter coat", "Manor", 239.0, 30, 0),
)


def _purchases(tl: _Timeline) -> None:
    def buy(bought: date, item: str, merchant: str, price: float, ret: int, warranty: int) -> None:
        currency = tl.home(bought)[2]
        fields: dict[str, _FieldValue] = {
            "item": item,
            "merchant": merchant,
            "price": price,
            "currency": currency,
            "bought": bought,
            "return_by": bought + timedelta(days=ret),
        }
        if warranty:
            fields["warranty_until"] = _years_later(bought, warranty)
        when = datetime.combine(bought, time(16, 40))
        key = f"purchase-{bought.isoformat()[:7]}-{_slug(item)}"
        said = f"Bought {item} at {merchant} for {_money(price, currency)}."
        if ret <= 30 and bought >= tl.last_day - timedelta(days=ret):
            said += f" {ret} days to return them if they're not great."
        tl.add(when, "Purchase", key, fields, said)
        tl.spend(when + timedelta(minutes=1), price, currency, "shopping", merchant)

    for iso, item, merchant, price, ret, warranty in _PURCHASES:
        buy(tl.day(iso), item, merchant, price, ret, warranty)
    # story 5: the return window closes three days after the last day of the history
    bought = tl.last_day - timedelta(days=27)
    if bought >= tl.start:
        buy(bought, "noise-cancelling headphones", "Digitec", 279.0, 30, 2)


_BOOKS = (
    ("2024-01-28", "The Design of Everyday Things", "Don Norman"),
    ("2024-03-10", "Small Things Like These", "Claire Keegan"),
    ("2024-04-21", "Americanah", "Chimamanda Ngozi Adichie"),
    ("2024-06-09", "Things Fall Apart", "Chinua Achebe"),
    ("2024-08-04", "Surely You're Joking, Mr. Feynman!", "Richard P. Feynman"),
    ("2024-09-29", "The Overstory", "Richard Powers"),
    ("2024-11-24", "Just Enough Research", "Erika Hall"),
    ("2025-01-19", "Klara and the Sun", "Kazuo Ishiguro"),
    ("2025-03-30", "Thinking, Fast and Slow", "Daniel Kahneman"),
    ("2025-05-11", "Heidi", "Johanna Spyri"),
    ("2025-07-13", "Der Richter und sein Henker", "Friedrich Dürrenmatt"),
    ("2025-09-21", "東京奇譚集", "村上春樹 (Haruki Murakami)"),
    ("2025-11-09", "Tomorrow, and Tomorrow, and Tomorrow", "Gabrielle Zevin"),
    ("2025-12-14", "The Remains of the Day", "Kazuo Ishiguro"),
)


def _books(tl: _Timeline) -> None:
    for iso, title, author in _BOOKS:
        finished = tl.day(iso)
        rating = tl.rng.choice((3, 4, 4, 4, 5, 5))
        if title == "The Overstory":
            rating = 4  # raised to 5 by the update below
        key = f"book-{_slug(title) or finished.isoformat()}"
        said = f'Finished "{title}" by {author}. {rating} out of 5.'
        fields: dict[str, _FieldValue] = {
            "title": title,
            "author": author,
            "finished": finished,
            "rating": rating,
        }
        tl.add(datetime.combine(finished, time(22, 15)), "Book", key, fields, said)
    tl.update(
        tl.at("2024-10-20T10:00"),
        "Book",
        "book-the-overstory",
        {"rating": 5},
        "Still thinking about The Overstory weeks later. Make that a 5.",
    )

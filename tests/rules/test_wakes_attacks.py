"""Attacks on duplicate_charge's wakes: standing alerts must equal a whole run after each ingest."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.events import add, clock, retract, update

from uac_kernel.core.errors import EventError
from uac_kernel.rules import library as lib
from uac_kernel.state.query import UserView
from uac_kernel.workbench import Workbench

R = lib.duplicate_charge


def whole(wb: Workbench) -> dict[str, tuple[str, str]]:
    return {i: (a.severity, a.message) for i, a in R.alerts(UserView(wb.state)).items()}


def standing(wb: Workbench) -> dict[str, tuple[str, str]]:
    return {i: (a.severity, a.message) for i, a in wb.runner.active[R.name].items()}


def run(wb: Workbench, batches: list[list[dict[str, Any]]]) -> None:
    for n, b in enumerate(batches):
        wb.ingest(b)
        assert standing(wb) == whole(wb), (n, b, wb.state.now)


def d(s: str, k: int) -> str:
    return (date.fromisoformat(s) + timedelta(days=k)).isoformat()


def setup(tmp_path: Path, **kw: Any) -> Workbench:
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    # two warm-up changes so parts are built
    wb.ingest(
        [add("2025-01-01", "Transaction", "w1", merchant="Warm", amount=1.0, date="2025-01-01")]
    )
    wb.ingest(
        [add("2025-01-01", "Transaction", "w2", merchant="Warm", amount=2.0, date="2025-01-01")]
    )
    wb.ingest(
        [add("2025-01-01", "Transaction", "w3", merchant="Warm", amount=3.0, date="2025-01-01")]
    )
    return wb


ZONES = [
    "2025-01-01T23:30:00-08:00",
    "2025-01-01T00:30:00+14:00",
    "2025-01-01T23:59:59-12:00",
    "2025-01-01T00:00:00+13:45",
    "2025-01-01T12:00:00Z",
    "2025-01-01T23:30:00",
]


@pytest.mark.parametrize("when", ZONES)
def test_tz_datetimes_daily(tmp_path: Path, when: str) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add("2025-01-02", "Purchase", f"t{i}", merchant="Cafe", amount=5.0, date=when)
                for i in (1, 2)
            ]
        ],
    )
    assert wb.runner.parts.get(R.name) is not None
    run(wb, [[clock(d("2025-01-02", k))] for k in range(80, 96)])


@pytest.mark.parametrize("when", ZONES)
def test_tz_datetimes_hourly_clock(tmp_path: Path, when: str) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add("2025-01-02", "Purchase", f"t{i}", merchant="Cafe", amount=5.0, date=when)
                for i in (1, 2)
            ]
        ],
    )
    batches = []
    for k in range(88, 94):
        for h in (0, 7, 8, 16, 23):
            batches.append(
                [clock(f"{d('2025-01-01', k)}T{h:02d}:30:00{'-08:00' if h % 2 else '+09:00'}")]
            )
    run(wb, batches)


def test_two_date_fields(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    "t1",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-01",
                    posted="2025-03-01",
                ),
                add(
                    "2025-01-02",
                    "Transaction",
                    "t2",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-01",
                    posted_on="2025-03-15",
                    paid_on="2025-02-10",
                ),
            ]
        ],
    )
    run(wb, [[clock(d("2025-01-01", k))] for k in range(85, 170, 1)])


def test_future_charges(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-09-01",
                )
                for i in (1, 2)
            ]
        ],
    )
    run(wb, [[clock(d("2025-01-02", k))] for k in range(0, 400, 7)])
    run(wb, [[clock(d("2025-01-02", k))] for k in range(300, 420, 1)])


@pytest.mark.parametrize("jump", [399, 400, 401, 402])
def test_jump(tmp_path: Path, jump: int) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date=d("2025-01-02", jump - 91 + o),
                )
                for i, o in ((1, 0), (2, 1))
            ]
        ],
    )
    run(wb, [[clock(d("2025-01-02", jump))], [clock(d("2025-01-02", jump + 1))]])


def test_date_update_moves_wake(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-02",
                )
                for i in (1, 2)
            ]
        ],
    )
    run(
        wb,
        [
            [clock("2025-03-01")],
            [
                update("2025-03-01", "Transaction", "t1", date="2025-03-01"),
                update("2025-03-01", "Transaction", "t2", date="2025-03-02"),
            ],
        ],
    )
    run(wb, [[clock(d("2025-03-01", k))] for k in range(80, 100)])
    run(
        wb,
        [
            [update(d("2025-03-01", 100), "Transaction", "t1", date=None)],
            [update(d("2025-03-01", 101), "Transaction", "t2", date=d("2025-03-01", 101))],
        ],
    )


def test_undated_charges(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add("2025-01-02", "Transaction", f"t{i}", merchant="Cafe", amount=5.0)
                for i in (1, 2)
            ],
            [
                add(
                    "2025-01-03",
                    "Transaction",
                    "t3",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-03",
                )
            ],
        ],
    )
    run(wb, [[clock(d("2025-01-03", k))] for k in range(85, 100)])


def test_refund_later(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-02",
                )
                for i in (1, 2)
            ],
            [add("2025-02-02", "Refund", "r1", merchant="Cafe", amount=5.0, date="2025-02-01")],
            [
                add(
                    "2025-02-03",
                    "Transaction",
                    "t3",
                    merchant="Cafe",
                    amount=-5.0,
                    date="2025-03-03",
                )
            ],
        ],
    )
    run(wb, [[clock(d("2025-01-02", k))] for k in range(85, 200)])


def test_mixed_date_and_datetime(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-01",
                )
                for i in (1, 2)
            ],
            [
                add(
                    "2025-01-02",
                    "Purchase",
                    "x",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-01T23:30:00-08:00",
                )
            ],
        ],
    )
    run(wb, [[clock(d("2025-01-01", k))] for k in range(85, 96)])


def test_far_clock_then_back(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-02",
                )
                for i in (1, 2)
            ],
            [clock("2025-04-01")],
            [clock("2025-03-01")],
            [clock("2025-04-03")],
            [clock("2025-04-02")],
        ],
    )


def voc(op: str, binding: dict[str, Any], ts: str) -> dict[str, Any]:
    return {"kind": "vocabulary", "ts": f"{ts}T09:00:00", "op": op, "binding": binding}


def test_two_date_fields_due(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    "t1",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-01",
                    due="2025-03-01",
                ),
                add(
                    "2025-01-02",
                    "Transaction",
                    "t2",
                    merchant="Cafe",
                    amount=5.0,
                    charged_on="2025-02-10",
                    date="2025-01-02",
                ),
            ]
        ],
    )
    assert R.name in wb.runner.parts
    run(wb, [[clock(d("2025-01-01", k))] for k in range(85, 200)])
    assert R.name in wb.runner.parts


def test_role_binding_mid_way(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add("2025-01-02", "Bill", f"b{i}", merchant="Cafe", amount=5.0, date="2025-01-02")
                for i in (1, 2)
            ]
        ],
    )
    run(wb, [[voc("add", {"role": "charge", "type": "Bill"}, "2025-01-03")]])
    run(
        wb,
        [[add("2025-01-04", "Transaction", "t9", merchant="Zed", amount=9.0, date="2025-01-04")]],
    )
    run(wb, [[clock(d("2025-01-02", k))] for k in range(85, 96)])


def test_concept_binding_mid_way(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-02",
                    settled=d("2025-01-02", 30 + i),
                )
                for i in (1, 2)
            ]
        ],
    )
    run(
        wb,
        [[add("2025-01-04", "Transaction", "t9", merchant="Zed", amount=9.0, date="2025-01-04")]],
    )
    assert R.name in wb.runner.parts
    run(
        wb,
        [
            [
                voc(
                    "add",
                    {"concept": "payment.date", "type": "Transaction", "field": "settled"},
                    "2025-01-05",
                )
            ]
        ],
    )
    run(
        wb,
        [[add("2025-01-06", "Transaction", "t8", merchant="Zed", amount=8.0, date="2025-01-06")]],
    )
    run(
        wb,
        [[add("2025-01-07", "Transaction", "t7", merchant="Zed", amount=7.0, date="2025-01-06")]],
    )
    run(wb, [[clock(d("2025-01-02", k))] for k in range(85, 130)])


def test_concept_binding_mid_way_with_same_batch(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-02",
                    settled=d("2025-01-02", 30 + i),
                )
                for i in (1, 2)
            ]
        ],
    )
    run(
        wb,
        [[add("2025-01-04", "Transaction", "t9", merchant="Zed", amount=9.0, date="2025-01-04")]],
    )
    run(wb, [[clock("2025-01-10")]])
    run(
        wb,
        [
            [
                clock("2025-01-11"),
                voc(
                    "add",
                    {"concept": "payment.date", "type": "Transaction", "field": "settled"},
                    "2025-01-11",
                ),
                add(
                    "2025-01-11", "Transaction", "t8", merchant="Zed", amount=8.0, date="2025-01-06"
                ),
            ]
        ],
    )
    for k in range(85, 130):
        run(
            wb,
            [
                [clock(d("2025-01-02", k))],
                [
                    add(
                        d("2025-01-02", k),
                        "Transaction",
                        f"n{k}",
                        merchant="Q",
                        amount=float(k),
                        date="2025-01-02",
                    )
                ],
            ],
        )


def test_future_charge_clock_many_days(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date=d("2025-01-02", 10 + i),
                )
                for i in (1, 2)
            ]
        ],
    )
    run(
        wb,
        [
            [
                clock(d("2025-01-02", k)),
                add(
                    d("2025-01-02", k),
                    "Transaction",
                    f"n{k}",
                    merchant="Q",
                    amount=float(k),
                    date=d("2025-01-02", k),
                ),
            ]
            for k in range(1, 130)
        ],
    )
    assert R.name in wb.runner.parts


def test_failed_batch_then_clock(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-02",
                )
                for i in (1, 2)
            ]
        ],
    )
    with pytest.raises(EventError):
        wb.ingest(
            [
                clock("2025-04-10"),
                update("2025-04-10", "Transaction", "t1", date="2025-04-09"),
                add("2025-04-10", "Transaction", "bad", merchant="Cafe", amount="nope"),
            ]
        )
    assert standing(wb) == whole(wb)
    run(wb, [[clock(d("2025-01-02", k))] for k in range(85, 100)])


def test_reopen_then_clock(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-02",
                )
                for i in (1, 2)
            ],
            [clock("2025-03-01")],
        ],
    )
    wb.close()
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    assert standing(wb) == whole(wb)
    run(
        wb,
        [
            [
                add(
                    d("2025-03-01", k),
                    "Transaction",
                    f"n{k}",
                    merchant="Q",
                    amount=float(k),
                    date="2025-03-01",
                ),
                clock(d("2025-01-02", 85 + k)),
            ]
            for k in range(0, 15)
        ],
    )


def test_retract_and_readd_same_key(tmp_path: Path) -> None:
    wb = setup(tmp_path)
    run(
        wb,
        [
            [
                add(
                    "2025-01-02",
                    "Transaction",
                    f"t{i}",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-02",
                )
                for i in (1, 2)
            ],
            [
                retract("2025-01-03", "Transaction", "t1"),
                add(
                    "2025-01-03",
                    "Transaction",
                    "t1",
                    merchant="Cafe",
                    amount=5.0,
                    date="2025-01-03",
                ),
            ],
            [
                update("2025-01-04", "Transaction", "t2", merchant="Bar"),
                update("2025-01-04", "Transaction", "t2", merchant="Cafe", date="2025-01-04"),
            ],
        ],
    )
    run(wb, [[clock(d("2025-01-02", k))] for k in range(85, 100)])


TZS = ("-08:00", "+14:00", "Z", "+05:30", "-12:00", "")


@pytest.mark.parametrize("seed", range(6))
def test_random_wakes(tmp_path: Path, seed: int) -> None:
    import random

    rng = random.Random(seed)
    wb = setup(tmp_path)
    day = date(2025, 1, 2)
    live: list[tuple[str, str]] = []
    for step in range(90):
        r = rng.random()
        if r < 0.45:
            day += timedelta(days=rng.choice((0, 1, 1, 1, 2, 5, 30, 88, 90, 91, 92)))
        elif r < 0.48:
            day += timedelta(days=rng.choice((399, 400, 401)))
        ts = day.isoformat()
        batch: list[dict[str, Any]] = [clock(ts)]
        for _ in range(rng.randint(0, 3)):
            roll = rng.random()
            cd = day + timedelta(days=rng.randint(-95, 10))
            if roll < 0.5 or not live:
                t = rng.choice(("Transaction", "Purchase", "Refund"))
                key = f"k{step}_{len(batch)}"
                amt = rng.choice((5.0, 5.0, -5.0, 7.0))
                if t == "Purchase":
                    dv: Any = f"{cd.isoformat()}T{rng.randint(0, 23):02d}:30:00{rng.choice(TZS)}"
                else:
                    dv = cd.isoformat()
                f: dict[str, Any] = {"merchant": rng.choice(("Cafe", "Shop")), "amount": amt}
                if rng.random() < 0.9:
                    f["date"] = dv
                if t == "Transaction" and rng.random() < 0.3:
                    f["due"] = (cd + timedelta(days=rng.randint(0, 60))).isoformat()
                batch.append(add(ts, t, key, **f))
                live.append((t, key))
            elif roll < 0.85:
                t, key = rng.choice(live)
                if t == "Purchase":
                    nv: Any = f"{cd.isoformat()}T{rng.randint(0, 23):02d}:00:00{rng.choice(TZS)}"
                else:
                    nv = cd.isoformat()
                ch = rng.choice(
                    ({"date": nv}, {"amount": rng.choice((5.0, 7.0))}, {"merchant": "Shop"})
                )
                batch.append(update(ts, t, key, **ch))
            else:
                t, key = live.pop(rng.randrange(len(live)))
                batch.append(retract(ts, t, key))
        run(wb, [batch])
    assert R.name in wb.runner.parts

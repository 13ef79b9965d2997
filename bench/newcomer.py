"""What uac catches in histories written by someone who has not read its rule docs.

Each scenario of ``bench/newcomer/scenarios.json`` (18 that should raise an alert, 6 look-alike
traps that should not raise a critical one) is replayed through the real ``uac`` command in a
fresh store of its own: its events are ingested a day at a time, as an assistant would record
them, and after each day ``uac alerts --json`` is read. The log's latest date is uac's "today",
so the alerts standing after a day are what the user would have been told that day.

- An alert scenario is **caught** when an alert whose evidence names every record of
  ``expect.about`` stands after a day on or before ``expect_at``; **late** when it first stands
  after that day; **partial** when by then an alert names some of them only; **missed**
  otherwise; **refused** when ``uac ingest`` rejects a day of its history.
- A trap is a **false critical** when a critical alert stands after any of its days.

It writes ``--out`` (JSON, default ``bench/results/newcomer.json``) and a text table beside it
(``.txt``), prints the table and ends with "caught X of 18, false critical on traps Y of 6".

    python bench/newcomer.py [--only nc01 t01] [--out FILE] [--uac PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "bench" / "newcomer" / "scenarios.json"
OUT = ROOT / "bench" / "results" / "newcomer.json"
USER = "newcomer"
# one `uac` process: 2 s on an idle machine; this only catches a hang
TIMEOUT = 300


def default_uac() -> str:
    """The ``uac`` beside this interpreter (a checkout's ``.venv``), else the one on PATH."""
    beside = Path(sys.executable).parent / "uac"
    return str(beside) if beside.exists() else shutil.which("uac") or "uac"


def event_day(event: dict[str, Any]) -> date:
    """The calendar day (UTC, as uac reads ``ts``) an event happened on."""
    ts = datetime.fromisoformat(event["ts"])
    return (ts.astimezone(UTC) if ts.tzinfo else ts).date()


def days(events: list[dict[str, Any]]) -> Iterator[tuple[date, list[dict[str, Any]]]]:
    """The events grouped by day, in the order of the history."""
    group: list[dict[str, Any]] = []
    for event in events:
        if group and event_day(event) != event_day(group[0]):
            yield event_day(group[0]), group
            group = []
        group.append(event)
    if group:
        yield event_day(group[0]), group


def uac(exe: str, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [exe, "--db", str(db), "--user", USER, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)


def replay(exe: str, events: list[dict[str, Any]], work: Path) -> dict[str, Any]:
    """Ingest ``events`` a day at a time into a new store; each alert with the day it first stood."""
    db = work / "store.duckdb"
    seen: dict[str, dict[str, Any]] = {}
    for day, batch in days(events):
        path = work / f"{day.isoformat()}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in batch), encoding="utf-8")
        done = uac(exe, db, "ingest", str(path))
        if done.returncode != 0:
            return {
                "refused": done.stderr.strip() or done.stdout.strip(),
                "alerts": list(seen.values()),
            }
        done = uac(exe, db, "alerts", "--json")
        if done.returncode != 0:
            raise RuntimeError(f"uac alerts failed on {day}: {done.stderr.strip()}")
        for a in json.loads(done.stdout):
            seen.setdefault(
                a["id"],
                {
                    "first_day": day.isoformat(),
                    "rule": a["rule"],
                    "severity": a["severity"],
                    "keys": sorted({e["key"] for e in a["evidence"]}),
                    "message": a["message"],
                },
            )
    return {"refused": None, "alerts": list(seen.values())}


def judge(scenario: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The outcome of one scenario from the alerts its replay raised."""
    expect, by = scenario["expect"], scenario["expect_at"]
    alerts = run["alerts"]
    if not expect["alerts"]:
        critical = [a for a in alerts if a["severity"] == "critical"]
        outcome = (
            "refused"
            if run["refused"]
            else "false critical"
            if critical
            else "alert"
            if alerts
            else "quiet"
        )
        return {"outcome": outcome, "naming": critical[:1]}
    about = set(expect["about"])
    naming = sorted((a for a in alerts if about <= set(a["keys"])), key=lambda a: a["first_day"])
    some = [a for a in alerts if a["first_day"] <= by and about & set(a["keys"])]
    if run["refused"]:
        outcome = "refused"
    elif naming and naming[0]["first_day"] <= by:
        outcome = "caught"
    elif naming:
        outcome = "late"
    elif some:
        outcome = "partial"
    else:
        outcome = "missed"
    return {"outcome": outcome, "naming": (naming or some)[:1]}


def run_scenario(exe: str, scenario: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"newcomer-{scenario['id']}-") as tmp:
        run = replay(exe, scenario["events"], Path(tmp))
    verdict = judge(scenario, run)
    return {
        "id": scenario["id"],
        "story": scenario["story"],
        "expect_at": scenario["expect_at"],
        "expect": scenario["expect"],
        **verdict,
        "refused": run["refused"],
        "alerts": run["alerts"],
    }


def totals(results: list[dict[str, Any]]) -> dict[str, int]:
    alert = [r for r in results if r["expect"]["alerts"]]
    traps = [r for r in results if not r["expect"]["alerts"]]
    count = {
        o: sum(r["outcome"] == o for r in alert)
        for o in ("caught", "late", "partial", "missed", "refused")
    }
    return {
        "alert_scenarios": len(alert),
        **count,
        "critical_expected": sum(r["expect"]["critical"] for r in alert),
        "critical_caught": sum(
            r["outcome"] == "caught"
            and r["expect"]["critical"]
            and r["naming"][0]["severity"] == "critical"
            for r in alert
        ),
        "traps": len(traps),
        "false_critical": sum(r["outcome"] == "false critical" for r in traps),
        "trap_alerts": sum(r["outcome"] in ("alert", "false critical") for r in traps),
        "traps_refused": sum(r["outcome"] == "refused" for r in traps),
    }


def summary(t: dict[str, int]) -> str:
    return (
        f"caught {t['caught']} of {t['alert_scenarios']}, "
        f"false critical on traps {t['false_critical']} of {t['traps']}"
    )


def table(results: list[dict[str, Any]], t: dict[str, int]) -> str:
    lines = [f"{'id':<6} {'expected':<22} {'by':<11} {'outcome':<15} what uac said", "-" * 100]
    for r in results:
        e = r["expect"]
        want = ("alert, critical" if e["critical"] else "alert") if e["alerts"] else "no critical"
        if r["refused"]:
            said = r["refused"]
        elif r["naming"]:
            a = r["naming"][0]
            said = f"{a['first_day']} [{a['severity']}] {a['rule']}: {', '.join(a['keys'])}"
        else:
            said = f"{len(r['alerts'])} other alert(s)" if r["alerts"] else "nothing"
        lines.append(f"{r['id']:<6} {want:<22} {r['expect_at']:<11} {r['outcome']:<15} {said}")
    lines += [
        "",
        f"alert scenarios: caught {t['caught']}, late {t['late']}, partial {t['partial']}, "
        f"missed {t['missed']}, refused {t['refused']} (of {t['alert_scenarios']}); "
        f"critical where expected {t['critical_caught']} of {t['critical_expected']}",
        f"traps: false critical {t['false_critical']}, any alert {t['trap_alerts']}, "
        f"refused {t['traps_refused']} (of {t['traps']})",
        summary(t),
    ]
    return "\n".join(lines) + "\n"


def commit() -> str:
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=Path, default=SCENARIOS)
    ap.add_argument("--only", nargs="+", metavar="ID", help="run only these scenario ids")
    ap.add_argument(
        "--out", type=Path, default=OUT, help="result JSON; the text table goes beside it (.txt)"
    )
    ap.add_argument("--uac", default=default_uac(), help="the uac command (default: this venv's)")
    args = ap.parse_args(argv)

    scenarios = json.loads(args.scenarios.read_text(encoding="utf-8"))["scenarios"]
    if args.only:
        unknown = set(args.only) - {s["id"] for s in scenarios}
        if unknown:
            ap.error(f"no scenario {', '.join(sorted(unknown))} in {args.scenarios}")
        scenarios = [s for s in scenarios if s["id"] in args.only]

    results = []
    for s in scenarios:
        results.append(run_scenario(args.uac, s))
        print(f"{s['id']}: {results[-1]['outcome']}", file=sys.stderr, flush=True)
    t = totals(results)
    text = table(results, t)
    report = {
        "date": date.today().isoformat(),
        "uac_commit": commit(),
        "platform": platform.platform(),
        "scenarios": str(
            args.scenarios.relative_to(ROOT)
            if args.scenarios.is_relative_to(ROOT)
            else args.scenarios
        ),
        "totals": t,
        "summary": summary(t),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    args.out.with_suffix(".txt").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

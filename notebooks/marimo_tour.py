import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    return (mo,)


@app.cell
def _(mo):
    mo.md(r"""
    # A tour of uac in marimo

    uac keeps what an assistant knows about its user as a small software project: an
    **append-only event log**, folded into **typed records**, checkpointed as **readable Python
    code**, with **rules** that raise alerts and **one-line queries** that compute answers.

    marimo does not run IPython magics, so this notebook uses plain Python: the workbench
    (`uac.open`) and the helpers of `uac.marimo`, which wrap the same widgets and charts as the
    `%uac` magics of the Jupyter tour (`tour.ipynb`):
    `um.state_explorer(wb)`, `um.alert_inspector(wb)`, `um.log_browser(wb)`,
    `um.diff_view(wb, a, b)` and `um.chart(wb, kind)`.

    **The user** is Maya Okafor, synthetic: two years of her life (2024–2025) as 1,023 events —
    trips, money, workouts, medication, a move from Manchester to Zürich. Everything runs
    offline; the store is in memory, so nothing is written to disk.
    Open it with `marimo edit notebooks/marimo_tour.py`, or run it headless with
    `python notebooks/marimo_tour.py`.
    """)
    return


@app.cell
def _():
    import uac
    import uac.marimo as um
    from uac_kernel.demo.life import demo_events

    wb = uac.open(":memory:", user="maya")
    report = wb.ingest(demo_events())
    checkpoint = wb.checkpoint()
    return checkpoint, report, um, wb


@app.cell
def _(checkpoint, mo, report, wb):
    _counts = wb.state.counts()
    mo.md(f"""
    ## The store

    {report.summary()}. The typed state holds **{sum(_counts.values())} current records** in
    {len(_counts)} types; checkpoint {checkpoint.version} renders it as Python code
    ({checkpoint.records} records). Explore the types, their records and every version of one:
    """)
    return


@app.cell
def _(um, wb):
    um.state_explorer(wb)
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Alerts

    The shipped rules ran when the history arrived. Two alerts stand at its end; select one to
    see its evidence — the records it rests on and the log events behind them.
    """)
    return


@app.cell
def _(um, wb):
    um.alert_inspector(wb)
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## What if the GP prescribes amoxicillin?

    A what-if folds hypothetical events onto a **copy** of the state and shows what would
    change — records, alerts raised or cleared, answers before and after — with nothing
    appended to the log. Maya's penicillin allergy is still on record, so a new amoxicillin
    prescription would raise the drug–allergy alert again:
    """)
    return


@app.cell
def _(um, wb):
    prescription = {
        "kind": "fact",
        "ts": "2026-01-12T10:30:00",
        "op": "add",
        "type": "Medication",
        "key": "med-2026-01-amoxicillin",
        "fields": {"name": "amoxicillin", "dose_mg": 500.0, "active": True, "times_per_day": 3},
    }
    events_before = len(wb.log())
    whatif_view = um.whatif(wb, [prescription])
    whatif_view  # noqa: B018 (marimo shows a cell's last expression)
    return events_before, whatif_view


@app.cell
def _(events_before, mo, wb):
    mo.md(f"""
    When this cell ran, the log held **{len(wb.log())} events**, as it did before the what-if
    ({events_before}): the what-if wrote nothing. **Apply for real** appends the prescription
    through the validated ingest; the widget's heading then says where in the log it went.
    """)
    return


@app.cell
def _(mo, um):
    # In a static HTML export nothing runs the expression: the box is off and says why.
    _static = um.static_note("type an expression")
    expression = mo.ui.text_area(
        value="len([t for t in user.all(Trip) if t.international and t.start.year == 2025])",
        label="An expression over `user`",
        full_width=True,
        disabled=bool(_static),
    )
    mo.vstack(
        [
            mo.md(r"""
    ## Aggregate questions are code

    An aggregate question is one Python expression over the typed state, evaluated by
    `wb.eval` in a sandbox (no imports, no files, bounded time and memory). Edit the
    expression and the answer below follows; a mistake shows its error instead.
    """),
            expression,
            *([mo.callout(mo.md(_static), kind="warn")] if _static else []),
        ]
    )
    return (expression,)


@app.cell
def _(expression, um, wb):
    answer, _shown = um.evaluate(wb, expression.value)
    _shown  # noqa: B018 (marimo shows a cell's last expression)
    return (answer,)


@app.cell
def _(mo):
    mo.md(r"""
    The same state as SQL, one table per record type:
    """)
    return


@app.cell
def _(mo, wb):
    spending = wb.sql(
        "SELECT currency, category, count(*) AS payments, round(sum(amount), 2) AS total "
        "FROM Transaction WHERE currency IN ('GBP', 'CHF') "
        "GROUP BY ALL ORDER BY currency, total DESC LIMIT 10"
    )
    mo.ui.table(spending.records(), selection=None)
    return (spending,)


@app.cell
def _(mo):
    mo.md(r"""
    ## Charts

    `um.chart` returns a `mo.ui.altair_chart`: events over time, records over time, the alerts
    timeline, or a query result drawn by its shape (here a `Counter`: bars).
    """)
    return


@app.cell
def _(um, wb):
    um.chart(wb, "result", "Counter(t.country for t in user.all(Trip) if t.international)")
    return


@app.cell
def _(um, wb):
    um.chart(wb, "events", freq="month")
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## The log

    Every fact, utterance, schema change and alert is an event in the log; nothing is updated
    or deleted. The log browser pages through it (here: facts only).
    """)
    return


@app.cell
def _(um, wb):
    um.log_browser(wb, kind="fact")
    return


if __name__ == "__main__":
    app.run()

// WhatIfWidget: what a what-if would change, computed in the kernel (Workbench.whatif), and an
// Apply for real button that asks the kernel to append its events (Workbench.apply_whatif).

const MARK = { added: "+ added", changed: "~ changed", retracted: "− retracted" };
// Until the kernel answers a hello, Apply stays off: a static or exported copy of the widget
// has no kernel to append anything. Said beside the button if no answer comes soon.
const NO_KERNEL =
  "no kernel answers this view (a static or exported copy): open the notebook with its " +
  "kernel to apply the what-if";
const NO_KERNEL_AFTER_MS = 3000;

function render({ model, el }) {
  const root = h("section", { class: "uac uac-whatif", "aria-label": "What-if" });
  const status = statusLine(model, root);
  const heading = h("p", { class: "uac-status uac-whatif-heading", role: "status" });
  const body = h("div", { class: "uac-whatif-body" });
  const apply = button("Apply for real", () => {
    apply.disabled = true; // one click, one ingest: enabled again only if the kernel refused
    status.busy();
    model.send({ action: "apply" });
  });
  // Why Apply is off (a static export, a read-only workbench), beside the button.
  const note = h("span", { class: "uac-muted uac-whatif-readonly", role: "note" });
  const done = h("p", { class: "uac-status uac-whatif-done", role: "status" });
  root.append(heading, body, h("div", { class: "uac-controls" }, apply, note), done, status.node);
  el.replaceChildren(root);

  function badge(severity) {
    return h("span", { class: `uac-badge uac-sev-${severity}`, text: severity });
  }

  function section(title, total, shown, draw) {
    if (!total) return null;
    const more = total > shown.length ? ` (first ${count(shown.length)} of ${count(total)})` : "";
    return h(
      "details",
      { class: "uac-diff-section", open: true },
      h("summary", { text: `${title}: ${count(total)}${more}` }),
      draw(shown),
    );
  }

  function beforeAfter(f, change) {
    return [
      change === "added"
        ? null
        : h("span", { class: "uac-before" }, h("del", { text: show(f.before) })),
      change === "added" || change === "retracted" ? null : " → ",
      change === "retracted"
        ? h("span", { class: "uac-muted", text: " (retracted)" })
        : h("span", { class: "uac-after" }, h("ins", { text: show(f.after) })),
    ];
  }

  function records(items) {
    return table(null, ["what", "record", "before → after"], items, (c) => [
      h("td", { class: `uac-whatif-${c.change}`, text: MARK[c.change] || c.change }),
      h("th", { scope: "row" }, `${c.type} `, h("code", { text: c.key })),
      h(
        "td",
        {},
        c.fields.length
          ? h(
              "ul",
              { class: "uac-review-fields" },
              c.fields.map((f) =>
                h("li", {}, h("code", { text: f.field }), ": ", beforeAfter(f, c.change)),
              ),
            )
          : h("p", { class: "uac-muted", text: "no field values" }),
      ),
    ]);
  }

  function evidence(items) {
    if (!items.length) return h("p", { class: "uac-muted", text: "no records named as evidence" });
    return h(
      "ul",
      { class: "uac-evidence" },
      items.map((e) =>
        h(
          "li",
          {},
          h(
            "h4",
            { class: "uac-record-title" },
            h("span", { text: `${e.type} ` }),
            h("code", { text: e.key }),
            e.status === "current" ? null : h("span", { class: "uac-flag", text: ` ${e.status}` }),
          ),
          fieldList(e.fields),
          h("h5", { text: "Log events" }),
          eventList(e.events),
          e.hypothetical
            ? h("p", {
                class: "uac-muted",
                text: `and ${count(e.hypothetical)} of the what-if's own events`,
              })
            : null,
        ),
      ),
    );
  }

  function alertList(items, note) {
    return h(
      "div",
      { class: "uac-alert-list" },
      items.map((a) =>
        h(
          "details",
          { class: `uac-alert uac-sev-${a.severity}` },
          h(
            "summary",
            {},
            badge(a.severity),
            " ",
            h("strong", { text: a.rule }),
            a.category ? h("span", { class: "uac-muted", text: ` · ${a.category}` }) : null,
            h("span", { class: "uac-message", text: ` — ${a.message}` }),
          ),
          note(a),
          h("h4", { text: "Evidence" }),
          evidence(a.evidence),
        ),
      ),
    );
  }

  function answers(items) {
    return table(null, ["question", "before", "after"], items, (a) => [
      h(
        "th",
        { scope: "row" },
        h("span", { text: a.label }),
        a.expression !== a.label ? h("pre", { class: "uac-json", text: a.expression }) : null,
      ),
      h(
        "td",
        { class: "uac-before" },
        a.error_before ? h("span", { class: "uac-error", text: a.error_before }) : null,
        a.error_before ? null : h("del", { text: show(a.before) }),
      ),
      h(
        "td",
        { class: "uac-after" },
        a.error_after ? h("span", { class: "uac-error", text: a.error_after }) : null,
        a.error_after ? null : h("ins", { text: show(a.after) }),
      ),
    ]);
  }

  function timeline(svg) {
    if (!svg) return null;
    // An <img> of the SVG the kernel rendered: the browser draws it as a picture, so no text
    // in it reaches the page as markup and nothing in it can run.
    return h(
      "figure",
      { class: "uac-whatif-timeline" },
      h("img", {
        src: `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`,
        alt: "Alert timeline: the real run and the what-if",
      }),
    );
  }

  const served = model.get("served");
  let live = false; // a kernel answered since this view was drawn
  let waited = false; // long enough without an answer to say so

  // Why Apply is off, to show beside it ("" while waiting for the kernel's first answer).
  function why() {
    return model.get("readonly") || (!live && waited ? NO_KERNEL : "");
  }

  function off() {
    const r = model.get("report");
    return model.get("applied") || !r || !r.totals || Boolean(model.get("readonly")) || !live;
  }

  function controls() {
    const applied = model.get("applied");
    const reason = why();
    apply.disabled = off();
    apply.title = reason;
    apply.textContent = applied ? "Applied" : "Apply for real";
    note.textContent = applied ? "" : reason;
    note.hidden = applied || !reason;
    done.textContent = model.get("done");
  }

  function draw() {
    const r = model.get("report");
    const applied = model.get("applied");
    controls();
    if (!r || !r.totals) {
      heading.textContent = "";
      body.replaceChildren();
      return;
    }
    const t = r.totals;
    // The kernel's heading: the what-if's summary, then, once applied, where its events are.
    heading.textContent = model.get("heading") || r.summary;
    const unchanged = t.answers - t.answers_changed;
    body.replaceChildren(
      ...[
        h("p", {
          class: "uac-muted",
          text: applied
            ? "Below is what the what-if predicted before it was applied; the log may have " +
              "moved since, so the heading and the line under the button say what the ingest did."
            : `${count(r.new)} event${r.new === 1 ? "" : "s"} would be appended` +
              (r.skipped ? `, ${count(r.skipped)} already in the log` : "") +
              "; nothing is written until you apply.",
        }),
        timeline(model.get("timeline_svg")),
        section("Records", t.records, r.records, records),
        section("Alerts raised", t.raised, r.raised, (items) =>
          alertList(items, () => null),
        ),
        section("Alerts escalated", t.escalated, r.escalated, (items) =>
          alertList(items, (a) =>
            h("p", {}, "severity ", badge(a.before), " → ", badge(a.after)),
          ),
        ),
        section("Alerts cleared", t.cleared, r.cleared, (items) =>
          alertList(items, (a) =>
            a.reason ? h("p", { class: "uac-review-reason", text: `Cleared: ${a.reason}` }) : null,
          ),
        ),
        section("Answers that change", t.answers_changed, r.answers, answers),
        unchanged
          ? h("p", {
              class: "uac-muted",
              text: `${count(unchanged)} of ${count(t.answers)} answers stay the same`,
            })
          : null,
        section("Schema", r.schema.length, r.schema, (items) =>
          h(
            "ul",
            {},
            items.map((s) => h("li", { text: s })),
          ),
        ),
        section("Later events that would not apply", r.conflicts.length, r.conflicts, (items) =>
          h(
            "ul",
            {},
            items.map((s) => h("li", { text: s })),
          ),
        ),
      ].filter(Boolean),
    );
  }

  function settled() {
    if (model.get("served") !== served) live = true;
    status.update();
    // A refusal leaves the what-if unapplied: the button can be pressed again.
    controls();
  }

  draw();
  const timer = setTimeout(() => {
    waited = true;
    controls();
  }, NO_KERNEL_AFTER_MS);
  const stop = [
    () => clearTimeout(timer),
    listen(model, ["report", "timeline_svg", "applied", "done", "heading", "readonly"], draw),
    listen(model, ["error", "served"], settled),
  ];
  model.send({ action: "hello" });
  return () => stop.forEach((f) => f());
}

export default { render };

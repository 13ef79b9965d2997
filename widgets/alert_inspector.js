// AlertInspector: the standing alerts, each opening onto its evidence (records and the log
// events and utterances behind them) and its history. All of it is computed in the kernel.

const SEVERITIES = ["critical", "warning", "info"];

function render({ model, el }) {
  const root = h("section", { class: "uac uac-alerts", "aria-label": "Alerts" });
  const status = statusLine(model, root);
  const heading = h("p", { class: "uac-status", role: "status" });
  const list = h("div", { class: "uac-alert-list" });
  const past = h("div", { class: "uac-past" });
  root.append(status.node, heading, list, past);
  el.replaceChildren(root);

  function badge(severity) {
    return h("span", { class: `uac-badge uac-sev-${severity}`, text: severity });
  }

  function history(entries) {
    if (!entries.length) return h("p", { class: "uac-muted", text: "not in the log yet" });
    return table(
      "History",
      ["seq", "time", "recorded", "event", "severity", "message"],
      entries,
      (e) => [
        h("td", { class: "uac-seq", text: e.seq }),
        h("td", { class: "uac-ts" }, h("time", { text: e.ts })),
        h("td", { class: "uac-ts" }, h("time", { text: e.recorded_at })),
        h("td", { text: e.state }),
        h("td", {}, badge(e.severity)),
        h(
          "td",
          {},
          e.message,
          e.reason ? h("div", { class: "uac-muted", text: `why: ${e.reason}` }) : "",
        ),
      ],
    );
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
          h("p", {
            class: "uac-muted",
            text: `valid from ${e.valid_from || "?"}${e.valid_to ? ` to ${e.valid_to}` : ""}`,
          }),
          fieldList(e.fields),
          h("h5", { text: "Log events" }),
          eventList(e.events),
        ),
      ),
    );
  }

  // The constraint a rule was compiled from: its key, kind and title, and the JSON it is
  // (every string set as text, never as markup).
  function constraint(c) {
    return h(
      "div",
      { class: "uac-constraint" },
      h("h4", { text: "Constraint" }),
      h(
        "p",
        {},
        h("code", { text: c.key }),
        h("span", { class: "uac-muted", text: ` (${c.kind}) ` }),
        h("span", { text: c.title }),
      ),
      h("pre", { class: "uac-json", text: c.json }),
    );
  }

  function alertItem(a, withEvidence) {
    return h(
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
        a.not_in_force ? h("span", { class: "uac-muted", text: " (rule not in force)" }) : null,
      ),
      withEvidence && a.constraint ? constraint(a.constraint) : null,
      withEvidence ? [h("h4", { text: "Evidence" }), evidence(a.evidence)] : null,
      history(a.history),
    );
  }

  function draw() {
    const alerts = model.get("alerts");
    const counts = model.get("counts");
    const parts = SEVERITIES.filter((s) => counts[s]).map((s) => `${counts[s]} ${s}`);
    heading.textContent = alerts.length
      ? `${alerts.length} standing alert${alerts.length === 1 ? "" : "s"}: ${parts.join(", ")}`
      : "no standing alerts";
    list.replaceChildren(...alerts.map((a) => alertItem(a, true)));
    const gone = model.get("past");
    past.replaceChildren(
      gone.length
        ? h(
            "details",
            { class: "uac-past-list" },
            h("summary", { text: `Alerts that no longer stand (${gone.length})` }),
            gone.map((a) => alertItem(a, false)),
          )
        : "",
    );
  }

  draw();
  const stop = [
    listen(model, ["alerts", "past", "counts"], draw),
    listen(model, ["error", "served"], status.update),
  ];
  return () => stop.forEach((f) => f());
}

export default { render };

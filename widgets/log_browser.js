// LogBrowser: the user's events, one page at a time. Filtering and paging run in the kernel;
// this module only sends the `query` trait and draws the page it gets back. Where no kernel
// answers (a static export) the filters and the pager are off, and say why (kernelControls).

function render({ model, el }) {
  const root = h("section", { class: "uac uac-log", "aria-label": "Event log" });
  const status = statusLine(model, root);
  const send = (patch) => {
    status.busy();
    ask(model, patch);
  };

  const kind = h("select", { onchange: () => send({ kind: kind.value, page: 0 }) });
  const type = h("select", { onchange: () => send({ type: type.value, page: 0 }) });
  const text = h("input", {
    type: "search",
    placeholder: "in payload or source",
    oninput: debounce(() => send({ text: text.value, page: 0 }), 300),
  });
  const start = h("input", { type: "date", onchange: () => send({ start: start.value, page: 0 }) });
  const end = h("input", { type: "date", onchange: () => send({ end: end.value, page: 0 }) });
  const live = kernelControls(model);
  const clear = button("Clear filters", () =>
    send({ kind: "", type: "", text: "", start: "", end: "", page: 0 }),
  );
  const controls = h(
    "div",
    { class: "uac-controls", role: "search" },
    labelled("Kind", kind),
    labelled("Record type", type),
    labelled("Text", text),
    labelled("From", start),
    labelled("To", end),
    clear,
    live.note,
  );

  const summary = h("p", { class: "uac-status", role: "status" });
  const body = h("div", { class: "uac-scroll" });
  const nav = pager("Event log pages", (page) => send({ page }));
  live.group.append(controls, status.node, summary, body, nav.node);
  root.append(live.group);
  el.replaceChildren(root);

  function drawOptions() {
    const q = model.get("query");
    const kinds = model.get("kinds");
    fillSelect(
      kind,
      [
        { value: "", text: "all kinds" },
        ...kinds.map((k) => ({ value: k.name, text: `${k.name} (${count(k.count)})` })),
      ],
      q.kind,
    );
    fillSelect(
      type,
      [{ value: "", text: "all types" }, ...model.get("types").map((t) => ({ value: t, text: t }))],
      q.type,
    );
  }

  function drawQuery() {
    const q = model.get("query");
    kind.value = q.kind ?? "";
    type.value = q.type ?? "";
    reflect(text, q.text);
    reflect(start, q.start);
    reflect(end, q.end);
  }

  function drawRows() {
    const rows = model.get("rows");
    const total = model.get("total");
    const page = model.get("page");
    const first = page * model.get("page_size");
    summary.textContent = total
      ? `events ${count(first + 1)}–${count(first + rows.length)} of ${count(total)} (${model.get("elapsed_ms")} ms)`
      : "no events match";
    body.replaceChildren(
      rows.length
        ? table(null, ["seq", "time", "kind", "source", "payload"], rows, (r) => [
            h("td", { class: "uac-seq", text: r.seq }),
            h("td", { class: "uac-ts" }, h("time", { text: r.ts })),
            h("td", {}, h("span", { class: `uac-kind uac-kind-${r.kind}`, text: r.kind })),
            h("td", { class: "uac-source", text: r.source }),
            h(
              "td",
              { class: "uac-payload" },
              h(
                "details",
                {},
                h("summary", { text: r.summary }),
                h("pre", { class: "uac-json", text: r.payload }),
              ),
            ),
          ])
        : "",
    );
    nav.update(page, model.get("pages"));
  }

  drawOptions();
  drawQuery();
  drawRows();
  const stop = [
    listen(model, ["kinds", "types"], drawOptions),
    listen(model, ["query"], drawQuery),
    listen(model, ["rows", "total", "page", "pages", "served"], drawRows),
    listen(model, ["error", "served"], status.update),
    live.stop,
  ];
  return () => stop.forEach((f) => f());
}

export default { render };

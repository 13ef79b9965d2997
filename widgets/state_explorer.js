// StateExplorer: record types → the records of one type (paged in the kernel) → one record's
// versions and provenance. Choices go to the kernel through the `query` trait; where no kernel
// answers them (a static export) they are off, and say why (kernelControls).

function render({ model, el }) {
  const root = h("section", { class: "uac uac-state", "aria-label": "State explorer" });
  const status = statusLine(model, root);
  const send = (patch) => {
    status.busy();
    ask(model, patch);
  };

  const live = kernelControls(model);
  const types = h("ul", { class: "uac-types", "aria-label": "Record types" });
  const text = h("input", {
    type: "search",
    placeholder: "key or field value",
    oninput: debounce(() => send({ text: text.value, page: 0 }), 300),
  });
  const scope = h(
    "select",
    { onchange: () => send({ scope: scope.value, page: 0 }) },
    h("option", { value: "current", text: "current records" }),
    h("option", { value: "all", text: "with retracted ones" }),
  );
  const summary = h("p", { class: "uac-status", role: "status" });
  const records = h("div", { class: "uac-scroll" });
  const nav = pager("Record pages", (page) => send({ page }));
  const detail = h("div", { class: "uac-record", "aria-live": "polite" });
  const main = h(
    "div",
    { class: "uac-main" },
    h(
      "div",
      { class: "uac-controls", role: "search" },
      labelled("Filter", text),
      labelled("Show", scope),
      live.note,
    ),
    summary,
    records,
    nav.node,
    detail,
  );
  live.group.append(
    status.node,
    h("div", { class: "uac-split" }, h("nav", { class: "uac-side" }, types), main),
  );
  root.append(live.group);
  el.replaceChildren(root);

  function drawTypes() {
    const current = model.get("query").type;
    types.replaceChildren(
      ...model.get("types").map((t) =>
        h(
          "li",
          {},
          button(
            `${t.name} (${count(t.count)})`,
            () => send({ type: t.name, page: 0, key: "", text: "" }),
            {
              "aria-pressed": String(t.name === current),
              title: t.fields.map((f) => `${f.name}: ${f.ftype}`).join("\n"),
            },
          ),
        ),
      ),
    );
    if (!model.get("types").length)
      types.append(h("li", { class: "uac-muted", text: "no records yet" }));
  }

  function drawRecords() {
    const q = model.get("query");
    reflect(text, q.text);
    scope.value = q.scope || "current";
    const columns = model.get("columns");
    const rows = model.get("records");
    const total = model.get("total");
    summary.textContent = q.type
      ? `${count(total)} ${q.type} record${total === 1 ? "" : "s"}${q.text ? ` matching “${q.text}”` : ""}`
      : "";
    records.replaceChildren(
      rows.length
        ? table(null, ["key", ...columns, "since"], rows, (r) => [
            h(
              "th",
              { scope: "row" },
              button(r.key, () => send({ key: r.key }), {
                class: `uac-link${r.retracted ? " uac-retracted" : ""}`,
                "aria-pressed": String(r.key === q.key),
                title: r.retracted ? "retracted" : "show versions and provenance",
              }),
            ),
            ...columns.map((c) => h("td", { text: c in r.fields ? show(r.fields[c]) : "" })),
            h("td", { class: "uac-ts" }, h("time", { text: r.valid_from })),
          ])
        : "",
    );
    nav.update(model.get("page"), model.get("pages"));
  }

  function drawRecord() {
    const r = model.get("record");
    if (!r || !r.key) {
      detail.replaceChildren();
      return;
    }
    detail.replaceChildren(
      h(
        "h4",
        { class: "uac-record-title" },
        h("span", { text: `${r.type} ` }),
        h("code", { text: r.key }),
        r.current ? null : h("span", { class: "uac-flag", text: " not current" }),
      ),
      table(
        "Versions",
        ["valid from", "valid to", "status", "fields", "events"],
        r.versions,
        (v) => [
          h("td", { class: "uac-ts" }, h("time", { text: v.valid_from })),
          h("td", { class: "uac-ts" }, h("time", { text: v.valid_to || "now" })),
          h("td", { text: v.retracted ? "retracted" : v.valid_to ? "superseded" : "current" }),
          h("td", {}, fieldList(v.fields)),
          h("td", { class: "uac-seq", text: v.sources.map((s) => `#${s}`).join(" ") }),
        ],
      ),
      h("h5", { text: "Provenance" }),
      eventList(r.events),
    );
  }

  drawTypes();
  drawRecords();
  drawRecord();
  const stop = [
    listen(model, ["types"], drawTypes),
    listen(model, ["query"], drawTypes),
    listen(model, ["records", "columns", "total", "page", "pages", "served"], drawRecords),
    listen(model, ["record"], drawRecord),
    listen(model, ["error", "served"], status.update),
    live.stop,
  ];
  return () => stop.forEach((f) => f());
}

export default { render };

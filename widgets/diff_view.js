// DiffView: what changed between two checkpoints, computed in the kernel by Workbench.diff.
// Where no kernel answers (a static export) the checkpoint selects are off, and say why.

function render({ model, el }) {
  const root = h("section", { class: "uac uac-diff", "aria-label": "Checkpoint diff" });
  const status = statusLine(model, root);
  const choose = (name, select) => () => {
    status.busy();
    model.set(name, parseInt(select.value, 10));
    model.save_changes();
  };
  const live = kernelControls(model);
  const a = h("select", {});
  const b = h("select", {});
  a.addEventListener("change", choose("a", a));
  b.addEventListener("change", choose("b", b));
  const summary = h("p", { class: "uac-status", role: "status" });
  const body = h("div", { class: "uac-diff-body" });
  live.group.append(
    h(
      "div",
      { class: "uac-controls" },
      labelled("From checkpoint", a),
      labelled("To checkpoint", b),
      live.note,
    ),
    status.node,
    summary,
    body,
  );
  root.append(live.group);
  el.replaceChildren(root);

  function section(title, total, items, draw) {
    if (!total) return null;
    const more = total > items.length ? ` (first ${count(items.length)} of ${count(total)})` : "";
    return h(
      "details",
      { class: "uac-diff-section", open: true },
      h("summary", { text: `${title}: ${count(total)}${more}` }),
      draw(items),
    );
  }

  function records(items) {
    return table(null, ["type", "key", "fields"], items, (c) => [
      h("td", { text: c.type }),
      h("th", { scope: "row" }, h("code", { text: c.key })),
      h("td", {}, fieldList(c.fields)),
    ]);
  }

  function changes(items) {
    return table(
      null,
      ["type", "key", "field", "before", "after"],
      items.flatMap((c) =>
        c.changes.map((f, i) => ({ ...f, type: i ? "" : c.type, key: i ? "" : c.key })),
      ),
      (f) => [
        h("td", { text: f.type }),
        h("th", { scope: "row" }, f.key ? h("code", { text: f.key }) : ""),
        h("td", { text: f.field }),
        h("td", { class: "uac-before" }, h("del", { text: show(f.before) })),
        h("td", { class: "uac-after" }, h("ins", { text: show(f.after) })),
      ],
    );
  }

  function draw() {
    const versions = model.get("versions");
    const options = versions.map((v) => ({
      value: String(v.version),
      text: `v${v.version} · ${v.created_at} · ${count(v.records)} records`,
    }));
    fillSelect(a, options, String(model.get("a")));
    fillSelect(b, options, String(model.get("b")));
    const d = model.get("diff");
    if (!d || !d.totals) {
      summary.textContent = "";
      body.replaceChildren();
      return;
    }
    summary.textContent = d.summary;
    const schema = [
      ...d.new_types.map((t) => ({ what: "new type", name: t })),
      ...Object.entries(d.new_fields).flatMap(([t, fs]) =>
        fs.map((f) => ({ what: "new field", name: `${t}.${f}` })),
      ),
    ];
    body.replaceChildren(
      ...[
        section("Added", d.totals.added, d.added, records),
        section("Changed", d.totals.changed, d.changed, changes),
        section("Retracted", d.totals.retracted, d.retracted, records),
        section("Schema", schema.length, schema, (items) =>
          h(
            "ul",
            {},
            items.map((s) => h("li", {}, `${s.what} `, h("code", { text: s.name }))),
          ),
        ),
      ].filter(Boolean),
    );
    if (!body.childElementCount)
      body.append(h("p", { class: "uac-muted", text: "nothing changed" }));
  }

  draw();
  const stop = [
    listen(model, ["diff", "versions", "a", "b"], draw),
    listen(model, ["error", "served"], status.update),
    live.stop,
  ];
  return () => stop.forEach((f) => f());
}

export default { render };

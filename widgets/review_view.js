// ReviewView: model answers held for review. The kernel decides (Workbench.accept / reject);
// this module draws each held batch and sends the decision a person makes as a message. Until
// the kernel answers a hello, the buttons stay off: a static or exported view has no kernel to
// decide, and says so.

const MARK = { add: "+ new", update: "~ change", retract: "− RETRACT" };
const NO_KERNEL =
  "read-only: no kernel answers this view (a static or exported copy); open the notebook " +
  "with its kernel to accept or reject";

function render({ model, el }) {
  const root = h("section", { class: "uac uac-review", "aria-label": "Held for review" });
  const status = statusLine(model, root);
  const note = h("p", { class: "uac-muted uac-review-readonly", role: "note" });
  const done = h("p", { class: "uac-status", role: "status" });
  const body = h("div", { class: "uac-review-body" });
  root.append(status.node, note, done, body);
  el.replaceChildren(root);

  const served = model.get("served");
  let live = false; // a kernel answered since this view was drawn

  function why() {
    return model.get("readonly") || (live ? "" : NO_KERNEL);
  }

  function decide(message) {
    status.busy();
    model.send(message);
  }

  function fields(change) {
    const changed = change.fields.filter(
      (f) => change.op !== "update" || show(f.before) !== show(f.after),
    );
    if (!changed.length) return h("p", { class: "uac-muted", text: "no field values" });
    return h(
      "ul",
      { class: "uac-review-fields" },
      changed.map((f) =>
        h(
          "li",
          {},
          h("code", { text: f.field }),
          ": ",
          change.op === "add"
            ? null
            : h("span", { class: "uac-before" }, h("del", { text: show(f.before) })),
          change.op === "add" ? null : " → ",
          change.op === "retract"
            ? h("span", { class: "uac-muted", text: "(retracted)" })
            : h("span", { class: "uac-after" }, h("ins", { text: show(f.after) })),
        ),
      ),
    );
  }

  function batch(b) {
    const boxes = b.changes.map((c) =>
      h("input", { type: "checkbox", checked: true, "aria-label": `operation ${c.number}` }),
    );
    const rows = table(null, ["take", "#", "what", "record", "before → after"], b.changes, (c) => [
      h("td", {}, boxes[c.number - 1]),
      h("td", { text: String(c.number) }),
      h("td", { class: `uac-review-${c.op}`, text: MARK[c.op] || c.op }),
      h(
        "th",
        { scope: "row" },
        `${c.type} `,
        h("code", { text: c.key }),
        c.reason ? h("p", { class: "uac-muted", text: `reason: ${c.reason}` }) : null,
      ),
      h("td", {}, fields(c)),
    ]);
    const selected = () => b.changes.filter((c, i) => boxes[i].checked).map((c) => c.number);
    return h(
      "details",
      { class: "uac-review-batch", open: true },
      h("summary", {
        text: `Batch ${b.id}: ${count(b.changes.length)} operations, held ${b.held_at}`,
      }),
      h("p", { class: "uac-review-reason", text: `Held because ${b.reason}` }),
      h("p", { class: "uac-muted", text: `Turns: ${b.utterances.join(", ")}` }),
      rows,
      h(
        "div",
        { class: "uac-controls" },
        button("Accept all", () => decide({ action: "accept", batch: b.id }), off()),
        button(
          "Accept selected",
          () => decide({ action: "accept", batch: b.id, only: selected() }),
          off(),
        ),
        button("Reject", () => decide({ action: "reject", batch: b.id }), off()),
      ),
    );
  }

  function off() {
    return { disabled: why() !== "", title: why() };
  }

  function draw() {
    note.textContent = why();
    note.hidden = !why();
    done.textContent = model.get("done");
    const batches = model.get("batches");
    body.replaceChildren(
      ...(batches.length
        ? batches.map(batch)
        : [h("p", { class: "uac-muted", text: "no model answers are held for review" })]),
    );
  }

  function answered() {
    status.update();
    if (model.get("served") !== served && !live) {
      live = true;
      draw();
    }
  }

  draw();
  const stop = [
    listen(model, ["batches", "done", "readonly"], draw),
    listen(model, ["error", "served"], answered),
  ];
  model.send({ action: "hello" });
  return () => stop.forEach((f) => f());
}

export default { render };

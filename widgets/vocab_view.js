// VocabView: the user's vocabulary bindings, held proposals first. The kernel decides
// (Workbench.bind / unbind); this module draws each binding and sends the decision a person
// makes. Until the kernel answers a hello, the buttons stay off: a static or exported view has
// no kernel to decide, and says so.

const NO_KERNEL =
  "read-only: no kernel answers this view (a static or exported copy); open the notebook " +
  "with its kernel to accept or reject";

function render({ model, el }) {
  const root = h("section", { class: "uac uac-vocab", "aria-label": "Vocabulary bindings" });
  const status = statusLine(model, root);
  const note = h("p", { class: "uac-muted", role: "note" });
  const done = h("p", { class: "uac-status", role: "status" });
  const body = h("div", { class: "uac-vocab-body" });
  root.append(status.node, note, done, body);
  el.replaceChildren(root);

  const served = model.get("served");
  let live = false; // a kernel answered since this view was drawn

  function why() {
    return model.get("readonly") || (live ? "" : NO_KERNEL);
  }

  function decide(action, key) {
    status.busy();
    model.send({ action, key });
  }

  function row(b) {
    const off = why() !== "";
    const mine = b.author === "person";
    return [
      h("th", { scope: "row" }, h("code", { text: b.what })),
      h("td", { text: b.target }),
      h("td", { text: b.author }),
      h("td", { text: Number(b.score).toFixed(2) }),
      h("td", { class: `uac-vocab-${b.status}`, text: b.status }),
      h("td", { text: b.reason }),
      h(
        "td",
        { class: "uac-controls" },
        mine && b.status === "used"
          ? null
          : button("Accept", () => decide("accept", b.key), { disabled: off, title: why() }),
        button("Reject", () => decide("reject", b.key), { disabled: off, title: why() }),
      ),
    ];
  }

  function draw() {
    done.textContent = model.get("done");
    note.textContent = why();
    note.hidden = !why();
    const rows = model.get("bindings");
    body.replaceChildren(
      rows.length
        ? table(
            null,
            ["type.field", "concept", "author", "score", "status", "reason", ""],
            rows,
            row,
          )
        : h("p", { class: "uac-muted", text: "no bindings beyond the catalogue's defaults" }),
    );
  }

  function answered() {
    if (model.get("served") !== served) live = true;
    status.update();
    draw();
  }

  draw();
  const stop = [
    listen(model, ["bindings", "done", "readonly"], draw),
    listen(model, ["error", "served"], answered),
  ];
  model.send({ action: "hello" });
  return () => stop.forEach((f) => f());
}

export default { render };

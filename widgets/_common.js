// Helpers shared by the uac widgets. uac_kernel.widgets puts this file in front of each
// widget's own module (modules loaded from a string cannot import one another).
//
// Everything the kernel sends is data: it reaches the page through text nodes and
// textContent, never as HTML.

/** Make an element: h("button", { type: "button", text: "Next", onclick }, child, ...). */
function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = String(value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "value" || name === "checked" || name === "disabled" || name === "open")
      node[name] = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** A labelled control: the label wraps its input, so no ids are needed. */
function labelled(text, control) {
  return h("label", { class: "uac-field" }, h("span", { class: "uac-label", text }), control);
}

function button(text, onclick, props = {}) {
  return h("button", { type: "button", class: "uac-button", text, onclick, ...props });
}

/** A field value as text. */
function show(value) {
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) return value.map(show).join(", ");
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function count(n) {
  return Number(n).toLocaleString("en-US");
}

function debounce(fn, ms) {
  let timer;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/** Listen to model changes; returns the function that stops listening. */
function listen(model, names, fn) {
  const events = names.map((name) => `change:${name}`);
  for (const ev of events) model.on(ev, fn);
  return () => {
    for (const ev of events) model.off(ev, fn);
  };
}

/** Merge `patch` into the `query` trait and send it to the kernel. */
function ask(model, patch) {
  model.set("query", { ...model.get("query"), ...patch });
  model.save_changes();
}

/** Put `value` in an input unless the user is typing in it. */
function reflect(input, value) {
  if (document.activeElement !== input) input.value = value ?? "";
}

/** Fill a <select> with options [{value, text}], keeping `selected`. */
function fillSelect(select, options, selected) {
  select.replaceChildren(...options.map((o) => h("option", { value: o.value, text: o.text })));
  select.value = selected ?? "";
}

/** Field names and values as a definition list. */
function fieldList(fields) {
  const entries = Object.entries(fields || {});
  if (!entries.length) return h("p", { class: "uac-muted", text: "no field values" });
  return h(
    "dl",
    { class: "uac-fields" },
    entries.map(([name, value]) => [h("dt", { text: name }), h("dd", { text: show(value) })]),
  );
}

/** A table with a header row; `cells(row)` gives a row's cells (nodes or text). */
function table(caption, headers, rows, cells) {
  return h(
    "table",
    { class: "uac-table" },
    caption ? h("caption", { class: "uac-caption", text: caption }) : null,
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        headers.map((t) => h("th", { scope: "col", text: t })),
      ),
    ),
    h(
      "tbody",
      {},
      rows.map((row) =>
        h(
          "tr",
          {},
          cells(row).map((c) => (isCell(c) ? c : h("td", {}, c))),
        ),
      ),
    ),
  );
}

function isCell(node) {
  return node instanceof Node && (node.tagName === "TD" || node.tagName === "TH");
}

/** Log events behind a record: seq, time, what they say, and the utterances they came from. */
function eventList(events) {
  if (!events || !events.length) return h("p", { class: "uac-muted", text: "no log events" });
  return h(
    "ol",
    { class: "uac-events" },
    events.map((ev) =>
      h(
        "li",
        {},
        h("span", { class: "uac-seq", text: `#${ev.seq}` }),
        " ",
        h("time", { class: "uac-ts", text: ev.ts }),
        " ",
        h("span", { class: `uac-kind uac-kind-${ev.kind}`, text: ev.kind }),
        " ",
        h("span", { class: "uac-summary", text: ev.summary }),
        ev.source ? h("span", { class: "uac-source", text: ` · ${ev.source}` }) : null,
        ev.utterances && ev.utterances.length
          ? h(
              "ul",
              { class: "uac-utterances", "aria-label": "derived from" },
              ev.utterances.map((u) =>
                h(
                  "li",
                  {},
                  h("time", { class: "uac-ts", text: u.ts }),
                  " ",
                  h("strong", { text: `${u.speaker}: ` }),
                  h("q", { text: u.text }),
                  h("span", { class: "uac-source", text: ` · ${u.source}` }),
                ),
              ),
            )
          : null,
        ev.derived_from && ev.derived_from.length > (ev.utterances || []).length
          ? h("p", {
              class: "uac-muted",
              text: `derived from ${ev.derived_from.join(", ")} (not all in the log)`,
            })
          : null,
      ),
    ),
  );
}

/** First / previous / "page x of y" / next / last, plus a page number to go to. */
function pager(label, onPage) {
  const state = { page: 0, pages: 1 };
  const status = h("span", { class: "uac-page", "aria-live": "polite" });
  const first = button("« First", () => onPage(0), { "aria-label": `${label}: first page` });
  const prev = button("‹ Prev", () => onPage(state.page - 1), {
    "aria-label": `${label}: previous page`,
  });
  const next = button("Next ›", () => onPage(state.page + 1), {
    "aria-label": `${label}: next page`,
  });
  const last = button("Last »", () => onPage(state.pages - 1), {
    "aria-label": `${label}: last page`,
  });
  const jump = h("input", {
    type: "number",
    min: 1,
    class: "uac-jump",
    onchange: () => {
      const n = parseInt(jump.value, 10);
      if (Number.isFinite(n)) onPage(Math.max(0, n - 1));
    },
  });
  const node = h(
    "nav",
    { class: "uac-pager", "aria-label": label },
    first,
    prev,
    status,
    next,
    last,
    labelled("Go to page", jump),
  );
  function update(page, pages) {
    state.page = page;
    state.pages = pages;
    status.textContent = `page ${count(page + 1)} of ${count(pages)}`;
    first.disabled = prev.disabled = page <= 0;
    next.disabled = last.disabled = page >= pages - 1;
    jump.max = pages;
    reflect(jump, String(page + 1));
  }
  return { node, update };
}

/** The error line and busy state every widget has. */
function statusLine(model, root) {
  const error = h("p", { class: "uac-error", role: "alert" });
  function update() {
    const text = model.get("error");
    error.textContent = text ? `⚠ ${text}` : "";
    error.hidden = !text;
    root.removeAttribute("aria-busy");
  }
  update();
  return { node: error, update, busy: () => root.setAttribute("aria-busy", "true") };
}

/**
 * The controls that ask the kernel, off while the `readonly` trait gives a reason ("" when a
 * kernel answers them; e.g. a static export, where nothing does), with that reason in `note`,
 * to put beside them. The controls go in `group`, a fieldset: disabling it disables every
 * control inside, those drawn later too (a pager's buttons, a list of types).
 */
function kernelControls(model) {
  const group = h("fieldset", { class: "uac-live" });
  const note = h("span", { class: "uac-muted uac-readonly", role: "note" });
  function update() {
    const reason = model.get("readonly") || "";
    group.disabled = Boolean(reason);
    if (reason) group.setAttribute("title", reason);
    else group.removeAttribute("title");
    note.textContent = reason;
    note.hidden = !reason;
  }
  update();
  return { group, note, stop: listen(model, ["readonly"], update) };
}

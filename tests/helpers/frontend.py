"""A widget's front-end module run under node on the state the kernel synced, in a DOM just
large enough for it: what the page would show, where no browser is installed."""

from __future__ import annotations

import subprocess
from typing import Any

import orjson

__all__ = ["rendered"]

FAKE_DOM = """
// A DOM just large enough for the uac widget modules, to run one under node.
class Node {
  constructor(tag) {
    this.tagName = tag ? tag.toUpperCase() : "#text";
    this.children = [];
    this.attributes = {};
    this.listeners = {};
    this.className = "";
    this._text = "";
  }
  append(...nodes) {
    for (const n of nodes) this.children.push(n instanceof Node ? n : text(String(n)));
  }
  replaceChildren(...nodes) {
    this.children = [];
    this.append(...nodes);
  }
  setAttribute(name, value) {
    this.attributes[name] = String(value);
  }
  removeAttribute(name) {
    delete this.attributes[name];
  }
  addEventListener(name, fn) {
    (this.listeners[name] ||= []).push(fn);
  }
  get textContent() {
    return this.tagName === "#text" || !this.children.length
      ? this._text
      : this.children.map((c) => c.textContent).join("");
  }
  set textContent(value) {
    this.children = [];
    this._text = String(value);
  }
  find(cls) {
    if (this.className.split(" ").includes(cls)) return this;
    for (const c of this.children) {
      const f = c.find(cls);
      if (f) return f;
    }
    return null;
  }
  findTag(tag) {
    if (this.tagName === tag) return this;
    for (const c of this.children) {
      const f = c.findTag(tag);
      if (f) return f;
    }
    return null;
  }
}
function text(s) {
  const n = new Node();
  n._text = s;
  return n;
}
globalThis.Node = Node;
globalThis.document = { createElement: (tag) => new Node(tag), activeElement: null };
"""

_RENDER = """
const states = STATES;
const model = {
  state: states[0],
  handlers: {},
  sent: [],
  get(name) { return this.state[name]; },
  on(ev, fn) { (this.handlers[ev] ||= []).push(fn); },
  off() {},
  send(msg) { this.sent.push(msg); },
};
const el = document.createElement("div");
const cleanup = widget.render({ model, el });
function seen() {
SEEN
}
const shown = [seen()];
for (const next of states.slice(1)) {
  const changed = Object.keys(next).filter((k) => JSON.stringify(next[k]) !== JSON.stringify(model.state[k]));
  model.state = next;
  for (const k of changed) for (const fn of model.handlers[`change:${k}`] || []) fn();
  shown.push(seen());
}
if (WAIT) {  // and once more after WAIT ms with no other change
  await new Promise((resolve) => setTimeout(resolve, WAIT));
  shown.push(seen());
}
cleanup();
console.log(JSON.stringify({ shown, sent: model.sent }));
"""


def rendered(
    widget: Any, states: list[dict[str, Any]], seen: str, wait: int = 0
) -> tuple[list[dict[str, Any]], list[Any]]:
    """What the module of ``widget`` (a widget object) shows (``seen``, a JS function body over
    ``el``) for each state the kernel synced in turn (and, with ``wait``, that many ms after
    the last), and the messages it sent."""
    module = str(widget._esm).replace("export default { render };", "const widget = { render };")
    script = (
        _RENDER.replace("STATES", orjson.dumps(states).decode())
        .replace("WAIT", str(wait))
        .replace("SEEN", seen)
    )
    run = subprocess.run(
        ["node", "--input-type=module"],
        input=FAKE_DOM + module + script,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = orjson.loads(run.stdout)
    return out["shown"], out["sent"]

"""The workbench in a real browser: JupyterLab runs a notebook in Chromium and we read the page.

What it proves that kernel-level tests cannot: the cells the magics write, the anywidget widgets
and the Altair charts really render in JupyterLab, offline, with no error output anywhere.

The test starts JupyterLab on a free localhost port with temporary root, config, data and runtime
directories (nothing of the user's is read or written), opens the notebook in headless Chromium
through Playwright, runs every cell with Lab's own ``notebook:run-all-cells`` command, waits until
the run is over, and then checks the page. A full-height screenshot and the server's log go to
``test-artifacts/jupyterlab-<notebook>.png`` / ``.log`` (kept on failure too).

Needs Debian's Chromium (``/usr/bin/chromium``, or ``$UAC_CHROMIUM``) and the ``browser`` extra.
Without them the test is skipped, unless ``UAC_REQUIRE_BROWSER=1`` (CI), where it fails.
Playwright never downloads a browser; it drives the system's.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
TOUR = ROOT / "notebooks" / "tour.ipynb"
HARNESS = Path(__file__).resolve().parent.parent / "browser_fixtures" / "harness.ipynb"

# The tour is the notebook users see; until it exists, a small fixture exercises the same faces.
NOTEBOOKS = [TOUR] if TOUR.exists() else [HARNESS]

CHROMIUM = os.environ.get("UAC_CHROMIUM", "/usr/bin/chromium")
# Without the background-networking flags Chromium keeps dialling Google, which this network
# refuses; as root it needs --no-sandbox.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REQUIRE_BROWSER = os.environ.get("UAC_REQUIRE_BROWSER") == "1"

# Limits for each step, generous because they only matter when something hangs: on a busy
# two-core machine (load 12) opening the tour alone has taken 30 s.
SERVER_TIMEOUT = 90.0  # seconds until JupyterLab answers
OPEN_TIMEOUT = 120.0  # seconds for each step of loading Lab and opening the notebook
RUN_TIMEOUT = 240.0  # seconds for all cells to run
RENDER_TIMEOUT = 60.0  # seconds for widgets and charts to draw once the run is over
WIDTH = 1280

STDERR = '.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]'
# An element made by one of our widgets' ESM: every class name they create starts with "uac-".
UAC_WIDGET = '.jp-OutputArea-output [class^="uac-"], .jp-OutputArea-output [class*=" uac-"]'
VEGA = ".jp-OutputArea-output .vega-embed svg, .jp-OutputArea-output .vega-embed canvas"


def _unavailable(reason: str) -> None:
    if REQUIRE_BROWSER:
        pytest.fail(f"{reason} (UAC_REQUIRE_BROWSER=1 makes the browser test mandatory)")
    pytest.skip(reason)


def _check_prerequisites() -> None:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        _unavailable(
            f"no Chromium at {CHROMIUM}: apt-get install chromium (or set UAC_CHROMIUM); "
            "Playwright's own browser download does not work here"
        )
    missing = [
        m for m in ("playwright", "jupyterlab", "ipykernel") if not importlib.util.find_spec(m)
    ]
    if missing:
        _unavailable(f"{', '.join(missing)} not installed: pip install -e '.[browser]'")


@dataclass
class Clock:
    """Seconds since the test began, at each named step (printed, and in failure messages)."""

    t0: float = field(default_factory=time.monotonic)
    marks: dict[str, float] = field(default_factory=dict)

    def mark(self, step: str) -> None:
        self.marks[step] = time.monotonic() - self.t0

    def __str__(self) -> str:
        return ", ".join(f"{step} {t:.1f}" for step, t in self.marks.items()) + " s"


# --- the JupyterLab server ------------------------------------------------------------------


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def _isolated_env(base: Path) -> dict[str, str]:
    """The server's and kernels' environment: every Jupyter and IPython dir a temporary one."""
    dirs = {
        "JUPYTER_CONFIG_DIR": base / "config",
        "JUPYTER_DATA_DIR": base / "data",
        "JUPYTER_RUNTIME_DIR": base / "runtime",
        "IPYTHONDIR": base / "ipython",
    }
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    config = dirs["JUPYTER_CONFIG_DIR"]
    # The news popup ("Would you like to receive official Jupyter news?") covers the page; this
    # is what `jupyter labextension disable` writes, without spawning it.
    _write_json(
        config / "labconfig" / "page_config.json",
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}},
    )
    settings = config / "lab" / "user-settings" / "@jupyterlab"
    # Every cell stays in the DOM (no virtual scrolling) so the checks and the screenshot see the
    # whole notebook; cells record their run times (reported per cell); no autosave.
    _write_json(
        settings / "notebook-extension" / "tracker.jupyterlab-settings",
        {"windowingMode": "none", "recordTiming": True},
    )
    _write_json(
        settings / "docmanager-extension" / "plugin.jupyterlab-settings", {"autosave": False}
    )
    _write_json(
        settings / "apputils-extension" / "notification.jupyterlab-settings",
        {"fetchNews": "false", "checkForUpdates": False},
    )
    # The kernel starts before Lab has loaded (see Lab.start_kernel) and would sit idle: let it
    # import the heavy modules the notebook is about to need meanwhile. Only sys.modules
    # changes; the notebook's own `%load_ext uac` still does all the work of loading.
    startup = dirs["IPYTHONDIR"] / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-preload.py").write_text(
        "import importlib as _importlib\n"
        "for _name in ('uac_kernel.notebook.magics', 'uac_kernel.notebook.widgets', 'uac_kernel.render.charts'):\n"
        "    try:\n"
        "        _importlib.import_module(_name)\n"
        "    except Exception:  # the cell that needs it will show the error\n"
        "        pass\n"
        "del _importlib, _name\n"
    )
    # jsonschema imports rfc3987_syntax if it is installed (jupyter-events brings it), which
    # builds a Lark grammar at import: ~4 CPU-seconds of the server's start. It only checks the
    # "iri" string format, so the server gets a stand-in that declines to import.
    stubs = base / "stubs"
    stubs.mkdir(exist_ok=True)
    (stubs / "rfc3987_syntax.py").write_text(
        'raise ImportError("left out of the browser test\'s JupyterLab: slow to import")\n'
    )
    env = dict(os.environ)
    env.update({k: str(v) for k, v in dirs.items()})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(stubs), env.get("PYTHONPATH")]))
    # Nothing of the developer's reaches the notebook: no store or user defaults, and no model
    # endpoint (a notebook under test must not call a hosted model).
    for k in ("JUPYTER_PORT", "JUPYTER_TOKEN", "UAC_DB", "UAC_USER", "UAC_MODEL", "UAC_OFFLINE"):
        env.pop(k, None)
    for k in [k for k in env if k.startswith("OPENAI_")]:
        env.pop(k)
    return env


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "api/status", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:  # URLError, refused, reset, timed out
        return False


class Lab:
    """A JupyterLab server of one test; ``ready()`` waits until it answers, ``stop()`` ends it."""

    def __init__(self, base: Path, notebook: Path) -> None:
        self.root = base / "root"
        # The notebook's folder comes along, so relative paths in it resolve as in the repo.
        shutil.copytree(
            notebook.parent,
            self.root,
            ignore=shutil.ignore_patterns(
                "*.duckdb", "*.duckdb.wal", ".ipynb_checkpoints", "__pycache__"
            ),
        )
        self.env = _isolated_env(base)
        self.log = base / f"jupyterlab-{notebook.stem}.log"
        self.url = ""  # the base URL, ending in "/", once ready() returned
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=0",  # the OS picks a free port; the runtime file says which
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.root}",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",  # so start_kernel() can POST plainly
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.news_url=",
            "--LabApp.extension_manager=readonly",
            # The kernel's state is thrown away: do not wait 5 s for it to exit at shutdown.
            "--KernelManager.shutdown_wait_time=1",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI runs as root
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.root,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a process group of its own: see stop()
            )

    def tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def ready(self, timeout: float = SERVER_TIMEOUT) -> None:
        runtime = Path(self.env["JUPYTER_RUNTIME_DIR"]) / f"jpserver-{self.proc.pid}.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {self.proc.returncode}:\n{self.tail()}")
            with contextlib.suppress(OSError, ValueError):
                info = json.loads(runtime.read_text())
                url = f"http://127.0.0.1:{info['port']}{info.get('base_url', '/')}"
                if _answers(url):
                    self.url = url
                    return
            time.sleep(0.1)
        pytest.fail(f"JupyterLab did not answer within {timeout:.0f} s:\n{self.tail()}")

    def start_kernel(self, path: str, kernel_name: str) -> None:
        """Start the notebook's session now, so its kernel boots while Chromium loads Lab.

        Lab finds the session by the notebook's path and connects to it.
        """
        body = {"path": path, "name": path, "type": "notebook", "kernel": {"name": kernel_name}}
        req = urllib.request.Request(
            self.url + "api/sessions",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=OPEN_TIMEOUT) as r:
            r.read()

    def stop(self) -> None:
        """SIGTERM lets the server shut its kernels down; then kill whatever of ours is left."""
        proc = self.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        # The server leads a process group of its own (its id is the server's pid).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        # Kernels run in sessions of their own; one that outlived the server is found by its
        # connection file, which lies in this test's runtime dir and nowhere else.
        for pid in _pids_mentioning(self.env["JUPYTER_RUNTIME_DIR"]):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _pids_mentioning(text: str) -> list[int]:
    """The processes whose command line contains ``text`` (Linux; elsewhere none)."""
    pids = []
    for d in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if text in (d / "cmdline").read_bytes().decode(errors="replace"):
                pids.append(int(d.name))
    return [p for p in pids if p != os.getpid()]


@contextlib.contextmanager
def lab_and_browser(base: Path, notebook: Path, clock: Clock) -> Iterator[tuple[Lab, Any]]:
    """Start JupyterLab and Chromium side by side; stop both whatever happens."""
    from playwright.sync_api import sync_playwright

    lab = Lab(base, notebook)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            clock.mark("chromium up")
            try:
                yield lab, browser
            finally:
                browser.close()
                clock.mark("chromium closed")
    finally:
        lab.stop()
        clock.mark("server stopped")


# --- driving the page -----------------------------------------------------------------------
#
# page.evaluate() awaits a returned promise with no timeout, so nothing below returns one: each
# step starts in the page and leaves its outcome in a window.__uac* slot, which
# page.wait_for_function() polls with a timeout.

# Open the notebook by path (whatever else the shell shows) and wait for its session.
_OPEN_JS = """
(path) => {
  window.__uacOpened = null;
  (async () => {
    const app = window.jupyterapp;
    await app.started;
    await app.restored;
    const panel = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
    await panel.context.ready;
    await panel.sessionContext.ready;
    app.shell.activateById(panel.id);
    app.shell.collapseLeft();
    window.__uacPanel = panel;
    return panel.sessionContext.session?.kernel?.name ?? null;
  })().then((kernel) => { window.__uacOpened = {kernel}; },
            (e) => { window.__uacOpened = {error: String(e)}; });
}
"""

_KERNEL_IDLE_JS = """
() => {
  const k = window.__uacPanel?.sessionContext?.session?.kernel;
  return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
}
"""

# Lab's own commands: clear what the file saved (so no stale output can pass a check), then
# run all; run-all's promise settles once every cell's execute reply is in.
_RUN_ALL_JS = """
() => {
  window.__uacRan = null;
  const app = window.jupyterapp;
  app.shell.activateById(window.__uacPanel.id);
  app.commands.execute('notebook:clear-all-cell-outputs')
    .then(() => app.commands.execute('notebook:run-all-cells'))
    .then((ok) => { window.__uacRan = {ok}; }, (e) => { window.__uacRan = {error: String(e)}; });
}
"""

# The run is over: run-all settled, the kernel is idle (late output and widget messages are in)
# and no prompt shows [*] (queued or running).
_RUN_OVER_JS = """
() => {
  if (!window.__uacRan) return false;
  const panel = window.__uacPanel;
  const k = panel.sessionContext.session?.kernel;
  if (!k || k.status !== 'idle') return false;
  return panel.content.widgets.every(
    (c) => c.model.type !== 'code' || !(c.promptNode?.textContent ?? '').includes('*'));
}
"""

# Each cell after the run: from Lab's models (source, count, outputs as nbformat JSON, timing)
# and from the DOM (what the editor and the output area show).
_CELLS_JS = """
() => window.__uacPanel.content.widgets.map((c) => ({
  type: c.model.type,
  source: c.model.sharedModel.getSource(),
  execution_count: c.model.type === 'code' ? c.model.executionCount : null,
  prompt: c.model.type === 'code' ? (c.promptNode?.textContent ?? '').trim() : '',
  timing: c.model.getMetadata('execution') ?? null,
  outputs: c.model.type === 'code' ? c.model.outputs.toJSON() : [],
  editor_text: c.node.querySelector('.cm-content')?.innerText ?? '',
  output_text: c.node.querySelector('.jp-OutputArea')?.innerText ?? '',
}))
"""

# The viewport height at which every cell fits: Lab scrolls inside the notebook, so a full-page
# screenshot of a 900-pixel window shows 900 pixels.
_FULL_HEIGHT_JS = """
() => {
  const nb = window.__uacPanel?.content;
  if (!nb) return window.innerHeight;
  const outer = nb.node.querySelector('.jp-WindowedPanel-outer') ?? nb.node;
  const last = nb.widgets[nb.widgets.length - 1]?.node;
  if (!last) return window.innerHeight;
  const top = outer.getBoundingClientRect().top;
  const bottom = last.getBoundingClientRect().bottom - top + outer.scrollTop;
  return Math.ceil(window.innerHeight + bottom - outer.clientHeight + 24);
}
"""

_SCROLL_TOP_JS = """
() => {
  const nb = window.__uacPanel?.content?.node;
  if (nb) (nb.querySelector('.jp-WindowedPanel-outer') ?? nb).scrollTop = 0;
}
"""


# After the notebook's own run: a code cell added at the end of the open notebook (in the page
# only; the file is not saved) and run there, in the same kernel.
_ADD_CELL_JS = """
(source) => {
  window.__uacCell = null;
  (async () => {
    const app = window.jupyterapp;
    const nb = window.__uacPanel.content;
    app.shell.activateById(window.__uacPanel.id);
    nb.model.sharedModel.insertCell(nb.model.cells.length, {cell_type: 'code', source});
    nb.activeCellIndex = nb.widgets.length - 1;
    await app.commands.execute('notebook:run-cell');
    return nb.widgets.length - 1;
  })().then((index) => { window.__uacCell = {index}; },
            (e) => { window.__uacCell = {error: String(e)}; });
}
"""

_CELL_OUTPUT_JS = """
(index) => {
  const c = window.__uacPanel.content.widgets[index];
  return {
    outputs: c.model.outputs.toJSON(),
    text: c.node.querySelector('.jp-OutputArea')?.innerText ?? '',
  };
}
"""


def run_cell(page: Any, source: str) -> dict[str, Any]:
    """Add a code cell at the end of the open notebook, run it, and return its outputs (nbformat
    JSON), the text its output area shows and its index."""
    page.evaluate(_ADD_CELL_JS, source)
    added = page.wait_for_function("() => window.__uacCell", timeout=RUN_TIMEOUT * 1000)
    cell = added.json_value()
    assert "error" not in cell, f"running an added cell failed: {cell['error']}"
    page.wait_for_function(_RUN_OVER_JS, polling=100, timeout=RUN_TIMEOUT * 1000)
    return {"index": cell["index"], **page.evaluate(_CELL_OUTPUT_JS, cell["index"])}


# A what-if in the past ("had amoxicillin been prescribed in February"), on a store of its own,
# shown as the widget; the notebook's own store is left alone. A hostile name rides along.
WHATIF_NAME = "Amoxicillin <b>500</b> mg"
_WHATIF_CELL = f"""
import tempfile
from pathlib import Path
from uac_kernel import Workbench
from uac_kernel.notebook.widgets_act import WhatIfWidget

_wi_wb = Workbench(Path(tempfile.mkdtemp()) / "whatif.duckdb", user="maya")
_wi_wb.ingest([{{"kind": "fact", "ts": "2025-01-05T09:00:00", "op": "add", "type": "Allergy",
                "key": "pen", "fields": {{"substance": "penicillin"}}}},
               {{"kind": "fact", "ts": "2025-03-01T09:00:00", "op": "add", "type": "Trip",
                "key": "york", "fields": {{"destination": "York"}}}}])
_wi_before = len(_wi_wb.log())
_wi = _wi_wb.whatif([{{"kind": "fact", "ts": "2025-02-01T08:00:00", "op": "add",
                      "type": "Medication", "key": "amox", "fields": {{"name": {WHATIF_NAME!r}}}}}],
                    as_of="2025-02-01T08:00:00", expressions=[])
WhatIfWidget(_wi_wb, _wi)
"""
_WHATIF_LOG_CELL = """
_wi_new = _wi_wb.log()[_wi_before:]
print("facts:", [(e.payload["op"], e.payload["key"]) for e in _wi_new if e.kind == "fact"])
print("alerts:", [(e.payload["state"], e.payload["rule"]) for e in _wi_new if e.kind == "alert"])
"""
WHATIF = ".jp-OutputArea-output .uac-whatif"


@dataclass
class WhatIfCheck:
    """What the what-if widget showed, before and after its Apply button was clicked."""

    shown: str = ""  # the widget's text before the click
    bold: int = 0  # <b> elements inside the widget (the hostile name must stay text)
    image: int = 0  # the timeline picture's natural width in pixels (0: not drawn)
    done: str = ""  # the line the widget showed after the click
    heading: str = ""  # the widget's heading after the click
    disabled: bool = False  # the button, after the click
    log: str = ""  # what the next cell printed of the log's new events
    outputs: list[dict[str, Any]] = field(default_factory=list)


def check_whatif(page: Any) -> WhatIfCheck:
    """Show a what-if widget in the running notebook, click Apply for real, read the log."""
    check = WhatIfCheck()
    shown = run_cell(page, _WHATIF_CELL)
    check.outputs = shown["outputs"]
    widget = page.locator(WHATIF).last
    widget.wait_for(timeout=RENDER_TIMEOUT * 1000)
    img = widget.locator(".uac-whatif-timeline img")
    img.wait_for(timeout=RENDER_TIMEOUT * 1000)
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth > 0", arg=img.element_handle()
    )
    check.image = int(img.evaluate("(img) => img.naturalWidth"))
    check.shown = widget.inner_text()
    check.bold = widget.locator("b").count()
    apply = widget.get_by_role("button", name="Apply for real")
    apply.click()
    done = widget.locator(".uac-whatif-done")
    page.wait_for_function(
        "(el) => el.textContent.length > 0 || el.closest('.uac').querySelector('.uac-error')"
        ".textContent.length > 0",
        arg=done.element_handle(),
        timeout=RENDER_TIMEOUT * 1000,
    )
    check.done = done.inner_text() or widget.locator(".uac-error").inner_text()
    check.heading = widget.locator(".uac-whatif-heading").inner_text()
    check.disabled = widget.locator("button.uac-button").first.is_disabled()
    check.log = run_cell(page, _WHATIF_LOG_CELL)["text"]
    return check


def _took(timing: dict[str, str] | None) -> str:
    """`` (1.2 s)``: a cell's run time, from the metadata Lab records with recordTiming."""
    try:
        assert timing is not None
        start = datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
    except (AssertionError, KeyError, ValueError):
        return ""
    return f" ({(end - start).total_seconds():.1f} s)"


def _text(value: str | list[str]) -> str:
    return "".join(value) if isinstance(value, list) else value


def describe(cells: list[dict[str, Any]]) -> str:
    """One line per code cell (count, first line, run time), then its errors and stderr."""
    lines = []
    for i, c in enumerate(cells):
        if c["type"] != "code":
            continue
        head = c["source"].splitlines()[0] if c["source"] else ""
        prompt = c.get("prompt") or f"[{c['execution_count']}]:"
        lines.append(f"  {prompt} cell {i}: {head}{_took(c['timing'])}")
        for o in c["outputs"]:
            if o.get("output_type") == "error":
                lines.append(f"      {o.get('ename')}: {o.get('evalue')}")
            elif o.get("output_type") == "stream" and o.get("name") == "stderr":
                lines.append("      stderr: " + _text(o.get("text", "")).strip()[:500])
    return "\n".join(lines)


@dataclass
class Run:
    cells: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)  # every rendered stderr output's text
    counts: dict[str, int] = field(default_factory=dict)  # matches of each awaited selector
    browser_errors: list[str] = field(default_factory=list)  # page errors, console errors
    after: Any = None  # what the ``after`` step of run_in_lab returned

    def report(self) -> str:
        text = describe(self.cells)
        if self.browser_errors:
            text += "\n  browser errors:\n    " + "\n    ".join(self.browser_errors[:20])
        return text


def run_in_lab(
    browser: Any,
    lab: Lab,
    path: str,
    screenshot: Path,
    wait_for: list[str],
    clock: Clock,
    after: Callable[[Any], Any] | None = None,
) -> Run:
    """Open ``path`` in Lab, run all cells, wait for each selector of ``wait_for`` to match,
    read the cells, run ``after(page)`` (its result in ``Run.after``) and take a full-height
    screenshot (also when a step fails)."""
    from playwright.sync_api import Error as PlaywrightError

    run = Run()
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    page.on("pageerror", lambda e: run.browser_errors.append(f"page error: {e}"))
    page.on(
        "console",
        lambda m: run.browser_errors.append(f"console: {m.text}") if m.type == "error" else None,
    )
    try:
        page.set_default_timeout(OPEN_TIMEOUT * 1000)
        page.goto(lab.url + "lab?reset", wait_until="domcontentloaded")
        page.wait_for_function("() => !!window.jupyterapp")
        clock.mark("lab loaded")
        page.evaluate(_OPEN_JS, path)
        opened = page.wait_for_function("() => window.__uacOpened").json_value()
        assert opened.get("kernel"), f"{path} did not open with a kernel: {opened}\n{lab.tail()}"
        clock.mark("notebook open")
        page.wait_for_function(_KERNEL_IDLE_JS, polling=100)
        clock.mark("kernel idle")

        page.evaluate(_RUN_ALL_JS)
        try:
            page.wait_for_function(_RUN_OVER_JS, polling=100, timeout=RUN_TIMEOUT * 1000)
        except PlaywrightError:
            run.cells = page.evaluate(_CELLS_JS)
            pytest.fail(f"the run did not end within {RUN_TIMEOUT:.0f} s:\n{run.report()}")
        ran = page.evaluate("() => window.__uacRan")
        assert "error" not in ran, f"notebook:run-all-cells failed: {ran['error']}"
        clock.mark("cells run")

        for selector in wait_for:
            with contextlib.suppress(PlaywrightError):
                page.wait_for_selector(selector, timeout=RENDER_TIMEOUT * 1000)
            run.counts[selector] = page.locator(selector).count()
        clock.mark("outputs drawn")
        # Read the page with the whole notebook in view, so that every line of every editor is
        # drawn (CodeMirror draws only what is near the viewport).
        _fit_viewport(page)
        run.cells = page.evaluate(_CELLS_JS)
        run.stderr = page.locator(STDERR).all_inner_texts()
        if after is not None:
            run.after = after(page)
            clock.mark("after the run")
            _fit_viewport(page)
        page.screenshot(path=str(screenshot), full_page=True)
        clock.mark("screenshot")
    except BaseException:  # pytest.fail() too: keep a picture of what went wrong
        with contextlib.suppress(PlaywrightError):
            _fit_viewport(page)
            page.screenshot(path=str(screenshot), full_page=True)
        raise
    return run


def _fit_viewport(page: Any) -> None:
    """Grow the window to the notebook's height (at most 16,000 pixels) and scroll to the top."""
    height = int(page.evaluate(_FULL_HEIGHT_JS))
    page.set_viewport_size({"width": WIDTH, "height": min(max(900, height), 16000)})
    page.wait_for_timeout(300)  # Lumino lays the shell out on the next frame
    page.evaluate(_SCROLL_TOP_JS)
    page.wait_for_timeout(100)


def _publish(path: Path) -> None:
    """Copy an artifact to test-artifacts/, where CI and people look for it."""
    if path.exists():
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy2(path, ARTIFACTS / path.name)


def _sources(notebook: Path) -> list[str]:
    """The source of every cell of the file, as saved."""
    cells = json.loads(notebook.read_text())["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]


def _kernel_name(notebook: Path) -> str:
    meta = json.loads(notebook.read_text()).get("metadata", {})
    return str(meta.get("kernelspec", {}).get("name", "python3"))


def _errors(run: Run) -> list[str]:
    found = []
    for i, c in enumerate(run.cells):
        for o in c["outputs"]:
            if o.get("output_type") == "error":
                found.append(f"cell {i}: {o.get('ename')}: {o.get('evalue')}")
        if "Error displaying widget" in c["output_text"]:
            found.append(f"cell {i}: a widget failed to display: {c['output_text'][:500]}")
    found += [
        "stderr: " + text.strip()[:2000]
        for text in run.stderr
        if "Traceback" in text or "UsageError" in text
    ]
    return found


# --- the test -------------------------------------------------------------------------------


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_renders_in_jupyterlab(notebook: Path, tmp_path: Path) -> None:
    _check_prerequisites()
    clock = Clock()
    screenshot = tmp_path / f"jupyterlab-{notebook.stem}.png"
    try:
        with lab_and_browser(tmp_path, notebook, clock) as (lab, browser):
            lab.ready()
            clock.mark("server up")
            lab.start_kernel(notebook.name, _kernel_name(notebook))
            run = run_in_lab(
                browser, lab, notebook.name, screenshot, [UAC_WIDGET, VEGA], clock, check_whatif
            )
    finally:
        _publish(screenshot)
        _publish(tmp_path / f"jupyterlab-{notebook.stem}.log")
    report = run.report()
    print(f"\n{notebook.name}: {clock}\n{report}\nscreenshot: {ARTIFACTS / screenshot.name}")

    errors = _errors(run)
    assert not errors, "the notebook shows errors:\n" + "\n".join(errors) + "\n" + report
    not_run = [
        i for i, c in enumerate(run.cells) if c["type"] == "code" and c["execution_count"] is None
    ]
    assert not not_run, f"cells {not_run} never ran:\n{report}"

    # (a) The model as code: each `%uac edit PART` cell of the file turned itself (set_next_input
    # with replace=True: no cell added) into a `%%uac cell` showing the record class.
    edits = [i for i, src in enumerate(_sources(notebook)) if src.startswith("%uac edit ")]
    assert edits, f"{notebook.name} has no `%uac edit` cell: this test expects one"
    assert len(run.cells) == len(_sources(notebook)), (
        f"{notebook.name} has {len(_sources(notebook))} cells, the page {len(run.cells)}: "
        f"a magic added cells instead of replacing its own\n{report}"
    )
    for i in edits:
        page_cell = run.cells[i]
        assert page_cell["editor_text"].startswith("%%uac cell"), (
            f"cell {i} still reads {page_cell['editor_text'][:80]!r}, not a %%uac cell\n{report}"
        )
        assert "class " in page_cell["editor_text"] and "(Record)" in page_cell["editor_text"], (
            f"the %%uac cell {i} shows no record class:\n{page_cell['editor_text'][:1000]}"
        )

    # (b) One of our anywidget widgets drew itself in an output area.
    assert run.counts[UAC_WIDGET], f"no uac widget on the page (no uac-* element):\n{report}"
    # (c) An Altair chart drew through vega-embed.
    assert run.counts[VEGA], f"no chart on the page (.vega-embed svg/canvas):\n{report}"

    # (d) A what-if widget drew its report and timeline; its Apply for real button appended the
    # what-if's events through the kernel, once, and the alert they raise was logged.
    check: WhatIfCheck = run.after
    assert not [o for o in check.outputs if o.get("output_type") == "error"], check.outputs
    assert WHATIF_NAME in check.shown and check.bold == 0, check.shown[:2000]
    assert "drug_allergy_cross_reactivity" in check.shown, check.shown[:2000]
    assert check.image > 0, "the what-if's timeline picture did not load"
    assert check.done.startswith("applied: 1 event appended"), check.done
    # the heading says what is true now, not the what-if's "nothing was appended"
    assert check.heading.startswith("applied: 1 event appended to the log at seq"), check.heading
    assert check.disabled, "the Apply button stayed enabled after applying"
    assert "facts: [('add', 'amox')]" in check.log, check.log
    assert "alerts: [('raised', 'drug_allergy_cross_reactivity')]" in check.log, check.log

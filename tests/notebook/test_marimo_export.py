"""The marimo tour exports to HTML that works offline (``uac_kernel.notebook.marimo_export``).

``marimo export html`` alone writes a page that loads marimo's front end from a CDN and stays
blank offline; the offline export points it at the front end the marimo wheel ships. Checked on
the files (the computed outputs are in the page, nothing is loaded from off the machine, every
local asset it names exists) and, where Debian's Chromium is installed, in a browser that may
reach nothing but a local server.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uac_kernel.core.errors import UacError
from uac_kernel.notebook.marimo_export import export_offline, main, remote_assets

pytest.importorskip("marimo", reason="pip install marimo")

TOUR = Path(__file__).resolve().parents[2] / "notebooks" / "marimo_tour.py"
CHROMIUM = os.environ.get("UAC_CHROMIUM", "/usr/bin/chromium")
HEADING = "A tour of uac in marimo"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_offline(TOUR, tmp_path_factory.mktemp("tour-html"))


def test_the_page_holds_the_computed_outputs(exported: Path) -> None:
    html = exported.read_text(encoding="utf-8")
    assert HEADING in html
    # Computed when the notebook ran: the ingest report of the demo history.
    assert re.search(r"\d+ events appended", html)


def test_the_page_turns_off_what_runs_no_python_and_says_why(exported: Path) -> None:
    html = exported.read_text(encoding="utf-8")
    note = f"this is a static export: run `marimo edit {TOUR}` to "
    # the what-if widget's exported state: Apply is off (the front end reads readonly), with
    # the reason it shows beside the button
    state = re.search(r'"applied": (true|false), .*?"readonly": "([^"]*)"', html)
    assert state is not None, "no what-if widget state in the page"
    assert state.groups() == ("false", note + "apply a what-if")
    # the log browser's and state explorer's filters and pagers, by the widgets' shared readonly
    for what in ("filter and page the log", "browse and filter the records"):
        assert f'"readonly": "{note}{what}"' in html
    # the expression box: disabled, and the callout after it says why
    box = re.search(r"marimo-text-area data-initial-value=(.*?)marimo-text-area", html)
    assert box is not None, "no expression box in the page"
    assert "data-disabled='true'" in box.group(1)
    after = html[box.end() : box.end() + 2000]
    assert "marimo-callout-output" in after and "to type an expression" in after


def test_the_page_loads_nothing_from_off_the_machine(exported: Path) -> None:
    html = exported.read_text(encoding="utf-8")
    assert remote_assets(html) == []
    assert "cdn.jsdelivr.net/npm/@marimo-team" not in html
    local = set(re.findall(r"""["'(]\./(assets/[^"')?#]+)""", html))
    assert local, "the page names no front-end assets"
    missing = sorted(a for a in local if not (exported.parent / a).is_file())
    assert missing == []


def test_remote_assets_finds_the_cdn_references_of_a_plain_export() -> None:
    page = (
        '<script type="module" crossorigin src="https://cdn.example/dist/assets/index.js"></script>'
        '<link rel="preload" href="https://cdn.example/dist/assets/font.woff2">'
        '<link rel="icon" href="./favicon.ico"><a href="https://marimo.io">marimo</a>'
    )
    assert remote_assets(page) == [
        "https://cdn.example/dist/assets/index.js",
        "https://cdn.example/dist/assets/font.woff2",
    ]


def test_a_missing_notebook_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UacError, match="no such notebook"):
        export_offline(tmp_path / "nope.py", tmp_path / "out")
    assert main([str(tmp_path / "nope.py"), "-o", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.startswith("uac: error: ")


@pytest.fixture
def served(exported: Path) -> Iterator[str]:
    """The export on a local HTTP server (browsers load JavaScript modules only over HTTP)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(exported.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join()


def test_the_page_draws_in_a_browser_that_can_reach_only_the_local_server(served: str) -> None:
    if not Path(CHROMIUM).exists():
        if os.environ.get("UAC_REQUIRE_BROWSER") == "1":
            pytest.fail(f"no Chromium at {CHROMIUM}")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]'")
    refused: list[str] = []
    errors: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
            ],
        )
        try:
            page = browser.new_page()

            def only_local(route: Any) -> None:
                if route.request.url.startswith(served):
                    route.continue_()
                else:
                    refused.append(route.request.url)
                    route.abort()

            page.route("**/*", only_local)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(served)
            page.get_by_text(HEADING).first.wait_for(timeout=60_000)
            # The charts (um.chart: mo.ui.altair_chart) draw with the bundled Vega, and the
            # widgets (anywidget, their code inlined in the page) show their exported state:
            # the state explorer's list of record types.
            page.locator(".vega-embed").first.wait_for(timeout=60_000)
            page.get_by_text(re.compile(r"^Trip \(\d+\)$")).first.wait_for(timeout=60_000)
            # its filter is off in the page, with the reason beside it
            assert page.get_by_placeholder("key or field value").first.is_disabled()
            page.get_by_text("to browse and filter the records").first.wait_for(timeout=60_000)
        finally:
            browser.close()
    assert refused == []
    assert errors == []

"""Export a marimo notebook as HTML that works offline: marimo's own export, with marimo's
front end taken from the installed package instead of a CDN.

``marimo export html`` runs the notebook and writes one HTML file holding every output, but the
page loads marimo's front end (JavaScript, CSS, fonts) from ``cdn.jsdelivr.net``: offline it
stays blank. The marimo wheel ships that same front end (``marimo/_static``, about 28 MB), so
this writes ``OUT/index.html`` — the export, its CDN references pointed at ``./`` — and copies
the front end beside it. Browsers load JavaScript modules only over HTTP, not from ``file://``,
so serve the directory with any local server::

    python -m uac_kernel.notebook.marimo_export notebooks/marimo_tour.py -o tour-html
    python -m http.server --directory tour-html 8000    # then open http://localhost:8000/

Outputs are what the notebook computed when exported; the page does not run Python (widgets
show their exported state, charts draw in the browser). So the notebook runs with the argument
``--uac-static-export=NOTEBOOK`` (``mo.cli_args()``), by which ``uac.marimo.static_note`` turns
off what would do nothing in the page (the what-if's Apply, the tour's expression box, the log
browser's and state explorer's filters and pagers) and says so beside it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from uac_kernel.core.errors import UacError
from uac_kernel.core.extras import require
from uac_kernel.core.outputs import HTML, Output, copy_tree, output_dir

__all__ = ["export_offline", "main"]

# <script src=...>, <link href=...> and the like that point off the machine.
_REMOTE_ASSET = re.compile(
    r"""<(?:script|link|img|source)\b[^>]*?\s(?:src|href)=["'](https?://[^"']+)["']""",
    re.IGNORECASE,
)


def _cdn_url() -> str:
    """Where ``marimo export html`` points the page's front end (its default asset URL)."""
    try:
        from marimo._templates import get_default_asset_url
    except ImportError:  # a marimo without it: the URL its 0.2x releases use
        import marimo

        return f"https://cdn.jsdelivr.net/npm/@marimo-team/frontend@{marimo.__version__}/dist"
    return get_default_asset_url()


def remote_assets(html: str) -> list[str]:
    """The off-machine URLs the page's tags load (scripts, stylesheets, fonts, images)."""
    return _REMOTE_ASSET.findall(html)


def export_offline(
    notebook: str | Path, out: str | Path, *, include_code: bool = True, force: bool = False
) -> Path:
    """Run ``notebook`` with ``marimo export html`` and write an offline copy to the directory
    ``out`` (``index.html`` plus marimo's front end); returns the path of ``index.html``.

    ``out`` is never a store or a fleet directory, and an ``index.html`` there that is not HTML
    is replaced only with ``force`` (``uac_kernel.core.outputs``)."""
    marimo = require("marimo", extra="marimo", feature="exporting a marimo notebook")
    source = Path(notebook)
    if not source.is_file():
        raise UacError(f"{source}: no such notebook")
    static = Path(str(marimo.__file__)).parent / "_static"
    if not (static / "assets").is_dir():
        raise UacError(f"marimo {marimo.__version__} ships no front end in {static}")
    # checked before the notebook runs: a refused path costs no export
    target = output_dir(out)
    page = Output(target / "index.html", HTML, force=force)
    page.check()
    with tempfile.TemporaryDirectory() as tmp:
        exported = Path(tmp) / "export.html"
        options = ["-o", str(exported), "--force"]
        if not include_code:
            options.append("--no-include-code")
        # the notebook's own arguments: it runs to be a static page (uac.marimo.static_note)
        args = ["--", f"--uac-static-export={notebook}"]
        done = subprocess.run(
            [sys.executable, "-m", "marimo", "export", "html", str(source), *options, *args],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not exported.exists():
            detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise UacError(f"marimo export html {source} failed: {detail[0]}")
        html = exported.read_text(encoding="utf-8")
    cdn = _cdn_url().rstrip("/") + "/"
    if cdn not in html:
        raise UacError(
            f"marimo {marimo.__version__}'s export does not load its front end from {cdn}; "
            "this exporter does not know where it does"
        )
    html = html.replace(cdn, "./")
    left = remote_assets(html)
    if left:
        raise UacError(
            f"the export still loads {left[0]} (and {len(left) - 1} more) from the network"
        )
    copy_tree(static, target, skip=("index.html", "*.md"))
    page.write_text([html])
    return Path(page.path)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m uac_kernel.notebook.marimo_export",
        description="Export a marimo notebook as HTML that works offline (serve the directory).",
    )
    ap.add_argument("notebook", help="the marimo notebook (.py)")
    ap.add_argument(
        "-o", "--out", required=True, help="directory to write index.html and assets to"
    )
    ap.add_argument("--no-include-code", action="store_true", help="leave the code out")
    ap.add_argument(
        "--force", action="store_true", help="replace an OUT/index.html that is not HTML"
    )
    args = ap.parse_args(argv)
    try:
        page = export_offline(
            args.notebook, args.out, include_code=not args.no_include_code, force=args.force
        )
    except UacError as exc:
        print(f"uac: error: {exc}", file=sys.stderr)
        return 1
    print(f"{page} written; serve it offline with: python -m http.server --directory {page.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

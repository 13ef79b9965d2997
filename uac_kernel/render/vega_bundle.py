"""The offline Vega bundle of Altair's Jupyter renderer, built once and kept across kernels.

``alt.renderers.enable("jupyter", offline=True)`` makes Altair's ``JupyterChart`` widget carry
Vega, Vega-Lite and vega-embed as one self-contained JavaScript module, which vl-convert builds
from Altair's widget source — in every new kernel, on its first chart (seconds of CPU). The
bundle depends only on that source and the Altair and vl-convert versions, so it is kept in the
user's cache directory (``$UAC_CACHE_DIR``, else platformdirs' ``user_cache_dir("uac")``, which
follows ``$XDG_CACHE_HOME``) under a name that hashes all of them.

A cache file starts with one line holding the SHA-256 of the rest; a file whose digest does not
match (truncated, edited, half-copied) is rebuilt, never handed to the browser. Files are
written to a temporary name in the same directory and renamed into place, so two kernels that
build at once each publish a whole file and a reader never sees a partial one. A cache that
cannot be written (read-only home) costs the rebuild, not the chart.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from uac_kernel.core import settings

__all__ = [
    "bundle_path",
    "cache_dir",
    "cached_bundle",
    "load_offline_bundle",
    "read_bundle",
    "write_bundle",
]

_HEADER = b"// uac vega bundle sha256="


def cache_dir() -> Path:
    """Where uac keeps rebuildable files: ``$UAC_CACHE_DIR``, else the platform's user cache."""
    configured = settings.CACHE_DIR.get()
    if configured:
        return Path(configured)
    import platformdirs

    return Path(platformdirs.user_cache_dir("uac", appauthor=False))


def bundle_key() -> str:
    """What the bundle is built from: Altair's widget source and the library versions."""
    import altair
    import vl_convert
    from altair.jupyter.jupyter_chart import load_js_src
    from altair.utils._importers import vl_version_for_vl_convert

    vlc = str(getattr(vl_convert, "__version__", "unknown"))  # not in its type stub
    h = hashlib.sha256()
    for part in (altair.__version__, vlc, vl_version_for_vl_convert()):
        h.update(part.encode() + b"\0")
    h.update(load_js_src().encode())
    return f"altair-{altair.__version__}-vl-convert-{vlc}-{h.hexdigest()[:16]}"


def bundle_path(directory: Path | None = None) -> Path:
    """Where the bundle is kept in ``directory`` (the cache directory if None)."""
    return (directory or cache_dir()) / "vega-bundle" / f"{bundle_key()}.js"


def read_bundle(path: Path) -> str | None:
    """The bundle in ``path``, or None if it is missing or does not match its digest."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    header, newline, body = data.partition(b"\n")
    if not newline or not header.startswith(_HEADER):
        return None
    if header[len(_HEADER) :].decode("ascii", "replace") != hashlib.sha256(body).hexdigest():
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def write_bundle(path: Path, bundle: str) -> bool:
    """Publish ``bundle`` at ``path`` atomically; False (and nothing half-written) on failure."""
    body = bundle.encode("utf-8")
    data = _HEADER + hashlib.sha256(body).hexdigest().encode("ascii") + b"\n" + body
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return False


def _build() -> str:
    """Have Altair build its offline bundle (vl-convert) and return it."""
    from altair import JupyterChart

    JupyterChart.enable_offline(offline=True)
    return str(JupyterChart._esm)


def cached_bundle(path: Path, build: Callable[[], str]) -> tuple[str, Literal["cache", "built"]]:
    """The bundle at ``path`` if it is whole, else ``build()``'s, published at ``path``."""
    bundle = read_bundle(path)
    if bundle is not None:
        return bundle, "cache"
    bundle = build()
    write_bundle(path, bundle)
    return bundle, "built"


def load_offline_bundle() -> Literal["already", "cache", "built"]:
    """Put ``JupyterChart`` in offline mode from the cached bundle, building and caching it on a
    miss; says which happened. Altair's own ``enable_offline``, called by the renderer at each
    chart, then finds the widget offline already and builds nothing."""
    from altair import JupyterChart

    # Read the setting first, even when the bundle is loaded already: a bad $UAC_CACHE_DIR is
    # then reported at every chart, not only at a kernel's first.
    directory = cache_dir()
    if JupyterChart._is_offline:
        return "already"
    bundle, found = cached_bundle(bundle_path(directory), _build)
    JupyterChart._esm = bundle
    JupyterChart._is_offline = True
    return found

"""The offline Vega bundle is built once and kept on disk: a new kernel reads it instead.

A fake builder stands in for vl-convert except in the one test that checks the real bundle, so
these tests say which path ran (cache or build), never how long it took.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from altair import JupyterChart

from uac_kernel.core.errors import UacError
from uac_kernel.render import vega_bundle as vb
from uac_kernel.render.charts import enable_offline


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory and an Altair widget as a new kernel has it (online)."""
    monkeypatch.setenv("UAC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(JupyterChart, "_esm", JupyterChart._esm)
    monkeypatch.setattr(JupyterChart, "_is_offline", False)
    return tmp_path / "cache"


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the bundles built; each build returns a new, recognisable bundle."""
    made: list[str] = []

    def fake_build() -> str:
        made.append(f"// bundle {len(made)}\nexport default {{}};\n")
        return made[-1]

    monkeypatch.setattr(vb, "_build", fake_build)
    return made


def new_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new kernel sees: the widget online again (the disk cache stays)."""
    monkeypatch.setattr(JupyterChart, "_esm", "online")
    monkeypatch.setattr(JupyterChart, "_is_offline", False)


def test_a_miss_builds_and_writes_the_bundle_with_its_digest(
    cache: Path, builds: list[str]
) -> None:
    assert vb.load_offline_bundle() == "built"
    assert len(builds) == 1
    path = vb.bundle_path()
    assert path.parent.parent == cache and path.exists()
    header, _, body = path.read_bytes().partition(b"\n")
    assert header == b"// uac vega bundle sha256=" + hashlib.sha256(body).hexdigest().encode()
    assert body.decode() == builds[0]
    assert vb.read_bundle(path) == builds[0]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_a_new_kernel_reuses_the_file_without_building_or_rewriting_it(
    cache: Path, builds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    vb.load_offline_bundle()
    path = vb.bundle_path()
    before = path.stat()
    new_kernel(monkeypatch)
    assert vb.load_offline_bundle() == "cache"
    assert len(builds) == 1
    assert JupyterChart._esm == builds[0] and JupyterChart._is_offline
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # Within one kernel, nothing is read again once the widget is offline.
    assert vb.load_offline_bundle() == "already"


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[: len(b) // 2], id="truncated"),
        pytest.param(lambda b: b[:-3] + b"XYZ", id="changed-bytes"),
        pytest.param(lambda b: b.partition(b"\n")[2], id="no-header"),
        pytest.param(lambda b: b"", id="empty"),
        pytest.param(lambda b: b.replace(b"\n", b" ", 1), id="one-line"),
        pytest.param(lambda b: b[:60] + b"\xff\xfe" + b[62:], id="bad-digest"),
    ],
)
def test_a_damaged_cache_file_is_rebuilt_not_trusted(
    cache: Path, builds: list[str], monkeypatch: pytest.MonkeyPatch, damage: object
) -> None:
    vb.load_offline_bundle()
    path = vb.bundle_path()
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    assert vb.read_bundle(path) is None
    new_kernel(monkeypatch)
    assert vb.load_offline_bundle() == "built"
    assert len(builds) == 2
    assert JupyterChart._esm == builds[1]
    assert vb.read_bundle(path) == builds[1]


def test_the_key_follows_the_library_versions(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import altair

    first = vb.bundle_path()
    monkeypatch.setattr(altair, "__version__", "0.0.0-test")
    assert vb.bundle_path() != first
    assert vb.bundle_path().parent == first.parent


def test_an_unwritable_cache_still_gives_a_bundle(
    tmp_path: Path, builds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("UAC_CACHE_DIR", str(blocker))
    new_kernel(monkeypatch)
    assert vb.load_offline_bundle() == "built"
    assert JupyterChart._is_offline and JupyterChart._esm == builds[0]
    assert not vb.write_bundle(vb.bundle_path(), "x")


def test_writers_racing_never_leave_a_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "b.js"
    bundles = [f"// writer {i}\n" + "x" * 200_000 for i in range(8)]
    seen: list[str | None] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.append(vb.read_bundle(path))

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=vb.write_bundle, args=(path, b)) for b in bundles * 3]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    reader.join()
    assert vb.read_bundle(path) in bundles
    assert all(s is None or s in bundles for s in seen)  # None only before the first landed
    assert [p.name for p in tmp_path.iterdir()] == ["b.js"]


def test_processes_building_at_once_publish_one_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "vega-bundle" / "k.js"
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from uac_kernel.render import vega_bundle as vb\n"
        "bundle = '// from ' + sys.argv[2] + '\\n' + 'y' * 2_000_000\n"
        "print(vb.cached_bundle(Path(sys.argv[1]), lambda: bundle)[1])\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(path), str(i)], stdout=subprocess.PIPE)
        for i in range(3)
    ]
    outs = [p.communicate()[0].decode().strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert set(outs) <= {"built", "cache"}
    assert [p.name for p in path.parent.iterdir()] == ["k.js"]
    assert (vb.read_bundle(path) or "").startswith("// from ")


def test_enable_offline_uses_the_real_bundle_and_a_second_kernel_reads_it(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one real build: vl-convert's bundle is cached verbatim and read back by a new kernel."""
    previous = enable_offline()
    try:
        built = JupyterChart._esm
        assert JupyterChart._is_offline and "vega" in built.lower()
        assert vb.read_bundle(vb.bundle_path()) == built
        new_kernel(monkeypatch)
        monkeypatch.setattr(vb, "_build", lambda: pytest.fail("a cached bundle was rebuilt"))
        enable_offline()
        assert JupyterChart._esm == built and JupyterChart._is_offline
    finally:
        import altair as alt

        alt.renderers.enable(previous)


def test_a_bad_cache_dir_is_refused_at_every_chart_not_only_the_first(
    cache: Path, builds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert vb.load_offline_bundle() == "built"
    monkeypatch.setenv("UAC_CACHE_DIR", "a\nb")
    with pytest.raises(UacError, match=r"^UAC_CACHE_DIR="):
        vb.load_offline_bundle()
    monkeypatch.setenv("UAC_CACHE_DIR", str(cache))
    assert vb.load_offline_bundle() == "already"

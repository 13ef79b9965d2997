"""Where a face may write a file: every file a user names (``--out``, ``--chart``, a chart or
an export from a notebook) is written as an :class:`Output`, through its ``replacing`` or ``write_text``.

The contract, the same for the CLI, the magics, the marimo helpers and the Python API:

- Never over a store. A path that is the same file (``os.path.samefile``: symbolic and hard
  links count) as a store in ``protect``, a store this process has open, or its ``.wal``; any
  existing file that is a DuckDB database (``DUCK`` at byte 8) or the ``.wal`` beside one; a
  path inside a fleet directory (``uac export``). Not even with ``force``.
- An existing file is replaced only when it is of the kind written (:class:`Kind`: its name
  ends with one of the kind's suffixes, and its first bytes are the kind's magic, or UTF-8
  text for a text kind) or with ``force``; otherwise refused with one line naming the path.
- A replacement is atomic: the new bytes go to a temporary file in the same directory
  (``.NAME.PID-HEX.tmp``, NAME cut to a few bytes so any valid name has one), are fsync'ed,
  the file about to be replaced is checked again, and ``os.replace`` puts it in place; a
  failure leaves the old file as it was and no temporary file. A temporary a killed process
  left (its PID gone, older than this process) is removed by the next write of that file. A
  FIFO or a terminal (``--out /dev/stdout``) is written straight through: nothing to lose.
- A path ending in ``/`` (or ``/.``) names a directory, never a file; any error of the file
  system on the way is one line naming the path.
- :meth:`Output.appending` (a progress file) and :func:`copy_tree` (a directory of assets)
  hold to the same rules; :meth:`Output.wrote` is the one "wrote PATH" message, escaped.

Nothing here imports DuckDB: the command's ``--help`` stays light.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
import re
import secrets
import shutil
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from uac_kernel.core.display import printable
from uac_kernel.core.errors import OutputRefused

__all__ = [
    "CHART_KINDS",
    "FLEET_MARKER",
    "GZIP",
    "HTML",
    "JSON",
    "JSONL",
    "PNG",
    "PYTHON",
    "SVG",
    "TSV",
    "Kind",
    "Output",
    "copy_tree",
    "output_dir",
]

FLEET_MARKER = (
    "uac-fleet.json"  # the file that makes a directory a fleet (uac_kernel.fleet.partition)
)
_DUCKDB_MAGIC = (8, b"DUCK")  # every DuckDB database file: 8 bytes of checksum, then "DUCK"
_SNIFF = 8192  # bytes of an existing file read to tell its kind
_TEMP_NAME_BYTES = 64  # of the output's name in its temporary's: NAME_MAX is 255
_STARTED = time.time()  # a temporary older than this process, of a dead one, is stale


@dataclass(frozen=True)
class Kind:
    """A kind of file a face writes: its name in messages, the suffixes its files take, and the
    bytes a file of it starts with (``None``: UTF-8 text)."""

    name: str
    suffixes: tuple[str, ...]
    magic: bytes | None = None

    def holds(self, path: Path, head: bytes) -> bool:
        """Whether the existing file ``path``, starting with ``head``, is of this kind."""
        if not head:
            return True  # an empty file holds nothing to lose
        if path.suffix.lower() not in self.suffixes:
            return False
        if self.magic is not None:
            return head.startswith(self.magic)
        if b"\0" in head:
            return False
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            # the sniffed block may end inside a character; anything else is not UTF-8 text
            return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
        return True


JSON = Kind("JSON", (".json",))
JSONL = Kind("JSONL", (".jsonl",))
GZIP = Kind("gzip", (".gz",), b"\x1f\x8b")
TSV = Kind("TSV", (".tsv", ".txt", ".csv"))
PYTHON = Kind("Python", (".py",))
SVG = Kind("SVG", (".svg",))
PNG = Kind("PNG", (".png",), b"\x89PNG\r\n\x1a\n")
HTML = Kind("HTML", (".html", ".htm"))
CHART_KINDS = {".svg": SVG, ".png": PNG, ".html": HTML}


@dataclass(frozen=True)
class Output:
    """A file a face was asked to write: ``path``, of ``kind``; ``force`` replaces an existing
    file of another kind; ``protect`` names the stores the command reads; ``what`` names the
    option in messages (``--out``) and ``flag`` how to force (``--force``, ``force=True``)."""

    path: str | Path
    kind: Kind
    force: bool = False
    protect: tuple[str | Path, ...] = ()
    what: str = ""
    flag: str = "--force"

    @property
    def shown(self) -> str:
        """How messages name the path: after its option (``--out 'x.json'``) if there is one."""
        return _shown(self.path, self.what)

    def wrote(self, detail: str) -> str:
        """The line a face prints once the file is written: ``wrote PATH (detail)``, the path
        escaped so that no name can move the cursor or split the line."""
        return f"wrote {printable(str(self.path))} ({detail})"

    def check(self) -> Path:
        """The file to write (a symbolic link's target, so the link stays), or OutputRefused."""
        with _refusing(self.shown):
            return self._checked(self.path)

    def _checked(self, path: str | Path) -> Path:
        target = Path(os.path.realpath(path))
        _refuse_store(target, self.shown, self.protect)
        name = os.path.basename(path)
        if str(path) and name in ("", ".", ".."):
            raise OutputRefused(f"{self.shown}: names a directory; name a file in it")
        try:
            mode = os.stat(path).st_mode
            head = _head(target) if stat.S_ISREG(mode) else b""
        except FileNotFoundError:
            return target
        except OSError as exc:
            raise OutputRefused(
                f"{self.shown}: cannot read it ({exc.strerror}); choose another path"
            ) from None
        if stat.S_ISDIR(mode):
            raise OutputRefused(f"{self.shown}: is a directory; name a file in it")
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            return Path(path)  # /dev/stdout: its link names no file (/proc/…/pipe:[…])
        if not stat.S_ISREG(mode):
            raise OutputRefused(f"{self.shown}: is not a regular file; choose another path")
        if _duckdb(head):
            raise OutputRefused(
                f"{self.shown}: is a DuckDB database (a store), never written over; choose "
                "another path"
            )
        if not self.force and not self.kind.holds(target, head):
            raise OutputRefused(
                f"{self.shown}: exists and is not a {self.kind.name} file; pass {self.flag} to "
                "replace it, or choose another path"
            )
        return target

    @contextlib.contextmanager
    def replacing(self) -> Iterator[Path]:
        """Check the path and yield where to write the new file: a temporary file beside it,
        put in place atomically when the block ends; if the block fails, the temporary file is
        removed and the old file is as it was. A FIFO or a terminal is yielded itself."""
        target = self.check()
        with _refusing(self.shown):
            special = target.exists() and not target.is_file()
        if special:
            yield target  # a FIFO or a terminal: nothing to replace
            return
        # the file the rename replaces is checked, not the path: a link re-pointed meanwhile
        # must not let a store put at the first target be replaced
        with _replacing(target, self.shown, lambda: self._checked(target)) as tmp:
            yield tmp

    def appending(self) -> BinaryIO:
        """The file opened to append to (created if new), checked like :meth:`check`; the
        opened file itself is checked again, so a store swapped in meanwhile is refused."""
        target = self.check()
        with _refusing(self.shown):
            # the resolved target, not followed if it became a link since the check
            fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
            f = os.fdopen(fd, "r+b")
            try:
                head = f.read(_SNIFF)
                if _duckdb(head) or not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OutputRefused(
                        f"{self.shown}: is not a regular {self.kind.name} file (a store?); "
                        "choose another path"
                    )
                self._checked(target)
            except BaseException:
                f.close()
                raise
        return f

    def write_text(self, chunks: Iterable[str]) -> int:
        """Write ``chunks`` of text (UTF-8, an unpaired surrogate escaped) through
        :meth:`replacing`; the characters written."""
        written = 0
        with (
            self.replacing() as tmp,
            _refusing(self.shown),
            open(tmp, "w", encoding="utf-8", errors="backslashreplace") as f,
        ):
            for chunk in chunks:
                f.write(chunk)
                written += len(chunk)
        return written

    def write_bytes(self, data: bytes) -> None:
        """Write ``data`` through :meth:`replacing`."""
        with self.replacing() as tmp, _refusing(self.shown):
            tmp.write_bytes(data)


def output_dir(path: str | Path, *, what: str = "") -> Path:
    """The directory ``path`` for a face to write its files in (created if new): never a store,
    a file, or a fleet directory or one inside it (OutputRefused)."""
    shown = _shown(path, what)
    with _refusing(shown):
        target = Path(os.path.realpath(path))
        _refuse_store(target, shown, ())
        if target.exists() and not target.is_dir():
            raise OutputRefused(f"{shown}: is a file, not a directory; name a directory")
        target.mkdir(parents=True, exist_ok=True)
    return target


def copy_tree(source: Path, target: str | Path, *, skip: tuple[str, ...] = ()) -> Path:
    """Copy the files under ``source`` into the directory ``target`` (see :func:`output_dir`),
    leaving out names matching a pattern of ``skip``; returns ``target`` resolved.

    Each file replaces the name it lands on, atomically: a symbolic or hard link there is
    replaced, never written through; a store there, or a directory of the tree that is a
    symbolic link, is refused (OutputRefused)."""
    root = output_dir(target)
    for folder, dirs, files in os.walk(source):
        dirs[:] = [d for d in dirs if not _skipped(d, skip)]
        into = root / Path(folder).relative_to(source)
        shown = repr(str(into))
        with _refusing(shown):
            if into.is_symlink():
                raise OutputRefused(
                    f"{shown}: is a symbolic link; remove it or choose another path"
                )
            into.mkdir(exist_ok=True)
        for name in files:
            if not _skipped(name, skip):
                dest = into / name
                with _replacing(dest, repr(str(dest)), functools.partial(_check_name, dest)) as tmp:
                    shutil.copyfile(Path(folder) / name, tmp)
    return root


def _skipped(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def _check_name(path: Path) -> None:
    """OutputRefused unless replacing the name ``path`` (not following it) loses no store."""
    shown = repr(str(path))
    _refuse_store(path, shown, ())
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise OutputRefused(f"{shown}: is a directory; remove it or choose another path")
    if stat.S_ISREG(mode) and _duckdb(_head(path)):
        raise OutputRefused(f"{shown}: is a DuckDB database (a store), never written over")


@contextlib.contextmanager
def _refusing(shown: str) -> Iterator[None]:
    """An error of the file system inside the block as one line naming the path."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise OutputRefused(f"{shown}: cannot write it ({reason}); choose another path") from None


@contextlib.contextmanager
def _replacing(target: Path, shown: str, check: Callable[[], object]) -> Iterator[Path]:
    """A temporary file beside ``target`` to write; once fsync'ed and ``check`` run again, it
    replaces ``target``. On any failure the temporary file is removed."""
    _remove_stale_temporaries(target)
    tmp = target.with_name(_temporary_name(target.name, f"{os.getpid()}-{secrets.token_hex(4)}"))
    try:
        with _refusing(shown):
            # 0o666 less the umask, as open() makes a file; an existing file's mode is kept
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            with contextlib.suppress(FileNotFoundError):
                os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        yield tmp
        with _refusing(shown):
            _fsync(tmp)
            check()  # again: a store may have been put there while this one wrote
            os.replace(tmp, target)
            _fsync(target.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def _temporary_name(name: str, tag: str) -> str:
    """``.NAME.TAG.tmp``, NAME cut to its first bytes: the temporary of any valid name is
    valid, and still says whose it is."""
    return f"{_temporary_prefix(name)}{tag}.tmp"


def _temporary_prefix(name: str) -> str:
    return f".{os.fsdecode(os.fsencode(name)[:_TEMP_NAME_BYTES])}."


def _remove_stale_temporaries(target: Path) -> None:
    """Remove the temporaries of ``target`` that killed processes left: named as this module
    names them, by a process that is gone, and last written before this one started."""
    mine = re.compile(re.escape(_temporary_prefix(target.name)) + r"(\d+)-[0-9a-f]{8}\.tmp")
    with contextlib.suppress(OSError):
        for entry in os.scandir(target.parent):
            found = mine.fullmatch(entry.name)
            if found is None or _alive(int(found[1])):
                continue
            with contextlib.suppress(OSError):
                if (
                    entry.is_file(follow_symlinks=False)
                    and entry.stat(follow_symlinks=False).st_mtime < _STARTED
                ):
                    os.unlink(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


def _refuse_store(target: Path, shown: str, protect: Iterable[str | Path]) -> None:
    """OutputRefused if ``target`` is a store given or open here, its ``.wal``, the ``.wal``
    beside any DuckDB file, or inside a fleet directory."""
    stores = [str(p) for p in protect if str(p) != ":memory:"]
    store = sys.modules.get("uac_kernel.log.store")  # loaded iff this process may have one open
    if store is not None:
        stores += [p for p in store.open_paths() if p != ":memory:"]
    for db in stores:
        for kept in (db, f"{db}.wal"):
            with contextlib.suppress(OSError):
                if os.path.samefile(target, kept):
                    raise OutputRefused(
                        f"{shown}: is the store {db} (or its log); choose another path"
                    )
    if target.name.endswith(".wal") and _is_duckdb_file(target.with_name(target.name[:-4])):
        raise OutputRefused(
            f"{shown}: is the write-ahead log of a DuckDB store; choose another path"
        )
    for parent in (target, *target.parents):
        if (parent / FLEET_MARKER).is_file():
            raise OutputRefused(
                f"{shown}: is inside the fleet directory {parent}, which uac manages; choose "
                "a path outside it"
            )


def _shown(path: str | Path, what: str) -> str:
    return f"{what} {str(path)!r}" if what else repr(str(path))


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(_SNIFF)


def _duckdb(head: bytes) -> bool:
    offset, magic = _DUCKDB_MAGIC
    return head[offset:].startswith(magic)


def _is_duckdb_file(path: Path) -> bool:
    try:
        return path.is_file() and _duckdb(_head(path))
    except OSError:
        return False


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

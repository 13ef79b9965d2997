"""Every environment variable uac reads, each read through one typed parser.

A variable that is unset or empty (``UAC_DB= uac ...``) means its default. Any other value must
parse as its kind — a whole number, a number of seconds, a switch, or text — or the read raises
the error class of the part that reads it (``QueryError`` for the SQL bounds, ``StoreError`` for
the store, ``ModelError`` for the model), so the command prints it as one line and a notebook
shows a ``UsageError``. The line names the variable, its value (escaped, shortened; a secret is
not echoed) and what to set instead::

    UAC_LOCK_TIMEOUT='nan' is not a number of seconds: set it to a number ≥ 0, e.g. 10, or unset it

Numbers are ASCII digits only: ``float()`` would take ``'١٢'``, ``'inf'``, ``'nan'`` and
``'1e400'`` (infinity), and ``int()`` would take ``'١٢'`` and spend quadratic time on a
100,000-digit string, so neither sees a value before it matched the pattern and its length.
An argument that sets what a variable sets (``deadline=``, ``base_url=``) goes through the
same check (``check``), so neither admits what the other refuses. ``table()`` is the README's
table of variables.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from uac_kernel.core.errors import (
    FleetError,
    ModelError,
    QueryError,
    StoreError,
    UacError,
    UnknownUser,
)

__all__ = [
    "CACHE_DIR",
    "DB",
    "LOCK_TIMEOUT",
    "MODEL",
    "MODEL_DEADLINE",
    "OFFLINE",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "RAY_ADDRESS",
    "SETTINGS",
    "SQL_MEMORY_MB",
    "SQL_THREADS",
    "SQL_TIMEOUT",
    "USER",
    "Count",
    "Seconds",
    "Setting",
    "Switch",
    "Text",
    "Url",
    "redacted",
    "store_path",
    "table",
]

_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_WHOLE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_BLANKS = " \t\r\n"  # around a number or a switch, as a shell or a .env file may leave them
_SHOWN = 40  # characters of a bad value quoted back
_DAY = 86_400.0
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Setting:
    """One environment variable: what it sets, its default as documented, and the error class
    of the part of uac that reads it."""

    name: str
    meaning: str
    default: str
    error: type[UacError]

    def text(self) -> str | None:
        """The raw value; ``None`` when the variable is unset or empty."""
        return os.environ.get(self.name) or None

    def refuse(self, text: str, problem: str, expected: str, given: str | None = None) -> UacError:
        """The one-line error for a value of this variable that cannot be used; ``given`` names
        the argument the value came from instead (``deadline``, ``--base-url``)."""
        if given is not None:
            return self.error(f"{given}={self._shown(text)} is {problem}: pass {expected}")
        return self.error(
            f"{self.name}={self._shown(text)} is {problem}: set it to {expected}, or unset it"
        )

    def _shown(self, text: str) -> str:
        # repr escapes control and invisible characters, so the line stays one line
        return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")

    @property
    def kind(self) -> str:
        """What a value must be, for the table."""
        raise NotImplementedError


@dataclass(frozen=True)
class Count(Setting):
    """A whole number from 1 to ``most``."""

    most: int = 1
    example: int = 1

    def get(self, default: int) -> int:
        """The value, else ``default`` when unset."""
        text = self.text()
        if text is None:
            return default
        word = text.strip(_BLANKS)
        if not _WHOLE.fullmatch(word):
            raise self.refuse(text, "not a whole number", self.kind + f", e.g. {self.example}")
        digits = word.lstrip("+-").lstrip("0")
        if len(digits) > len(str(self.most)) or int(digits or "0") > self.most:
            problem = "negative" if word.startswith("-") else f"more than {self.most:,}"
        elif word.startswith("-") and digits:
            problem = "negative"
        elif not digits:
            problem = "0"
        else:
            return int(digits)
        raise self.refuse(text, problem, self.kind + f", e.g. {self.example}")

    @property
    def kind(self) -> str:
        return f"a whole number from 1 to {self.most:,}"


@dataclass(frozen=True)
class Seconds(Setting):
    """A number of seconds, at most ``most`` (a timer cannot wait for ever); 0 only if ``zero``."""

    zero: bool = False
    most: float = _DAY
    example: str = "10"

    def get(self, default: float) -> float:
        """The value, else ``default`` when unset."""
        text = self.text()
        if text is None:
            return default
        word = text.strip(_BLANKS)
        if not _NUMBER.fullmatch(word):
            raise self.refuse(text, "not a number of seconds", self._expected)
        return self._bounded(float(word), text)  # ASCII digits: finite, or ±inf, never nan

    def check(self, value: float, given: str) -> float:
        """An argument ``given`` that sets what this variable sets, checked as the variable is."""
        text = repr(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise self.refuse(text, "not a number of seconds", self._expected, given)
        return self._bounded(float(value), text, given)

    def _bounded(self, value: float, text: str, given: str | None = None) -> float:
        if value < 0:
            raise self.refuse(text, "negative", self._expected, given)
        if value == 0 and not self.zero:
            raise self.refuse(text, "0", self._expected, given)
        if value > self.most:
            problem = f"more than {self.most:g} seconds (a day)"
            raise self.refuse(text, problem, self._expected, given)
        return value

    @property
    def _expected(self) -> str:
        return self.kind + f", e.g. {self.example}"

    @property
    def kind(self) -> str:
        low = "≥ 0" if self.zero else "> 0"
        return f"a number of seconds {low}, at most {self.most:g}"


@dataclass(frozen=True)
class Switch(Setting):
    """On or off: ``1``/``true``/``yes``/``on`` or ``0``/``false``/``no``/``off``."""

    def get(self) -> bool:
        """The value, else off when unset."""
        text = self.text()
        if text is None:
            return False
        word = text.strip(_BLANKS).lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise self.refuse(text, "not on or off", "1 or 0 (or true/false, yes/no, on/off)")

    @property
    def kind(self) -> str:
        return "1 or 0 (true/false, yes/no, on/off)"


@dataclass(frozen=True)
class Text(Setting):
    """Printable text (a name, a path, a URL); ``secret`` is never quoted back. With
    ``printable=False`` any text but a blank one (a user id: a store may hold any, and
    ``--user`` names it as given; it is shown escaped)."""

    secret: bool = False
    printable: bool = True

    def get(self) -> str | None:
        """The value, else ``None`` when unset."""
        text = self.text()
        if text is None:
            return None
        if not text.strip():
            raise self.refuse(text, "blank", "printable text")
        if self.printable and not text.isprintable():  # a control character, or not UTF-8
            raise self.refuse(text, "not printable text", "printable text")
        return text

    def _shown(self, text: str) -> str:
        return f"<{len(text)} characters, not shown>" if self.secret else super()._shown(text)

    @property
    def kind(self) -> str:
        return "printable text"


@dataclass(frozen=True)
class Url(Text):
    """An http or https URL with a host, quoted back as ``redacted`` shows it."""

    example: str = "http://localhost:8000/v1"

    def get(self) -> str | None:
        """The value, else ``None`` when unset."""
        text = super().get()
        return None if text is None else self.check(text)

    def check(self, text: str, given: str | None = None) -> str:
        """``text`` if it is a URL a call can be sent to; ``given`` names the argument it came
        from (``--base-url``) when it is not this variable's value."""
        expected = f"{self.kind}, e.g. {self.example}"
        if given is not None and (not text.strip() or not text.isprintable()):
            raise self.refuse(text, "not printable text", expected, given)
        try:
            parts = urlsplit(text.strip(_BLANKS))
            ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        except ValueError:  # a bracketed host that is not an IPv6 address
            ok = False
        # file:, ftp: or javascript: would be sent to the HTTP client, retried, and recorded
        if not ok:
            raise self.refuse(text, "not an http or https URL with a host", expected, given)
        return text

    def _shown(self, text: str) -> str:
        return super()._shown(redacted(text))

    @property
    def kind(self) -> str:
        return "an http or https URL with a host"


# A URL's user name and password: to the last "@" before its query or fragment (a raw "/" in a
# password would end the host part early and leak the rest; a path with "@" loses more when shown).
_USERINFO = re.compile(r"(?<=//)[^?#]*@")


def redacted(url: str) -> str:
    """``url`` as it may be shown or stored: without a user name and password, query or fragment
    (where keys are passed too). The call itself uses the whole URL."""
    return re.split(r"[?#]", _USERINFO.sub("", url, count=1), maxsplit=1)[0]


# A scheme (s3:, https:, md:, …): DuckDB opens such a path remotely, fetching the extension
# that reaches it.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def store_path(path: str | Path, *, memory: bool = True) -> str:
    """``path`` as uac and DuckDB both open it, or a one-line ``StoreError``: every face passes
    its store path (``--db``, env ``UAC_DB``, ``%uac open``) through here.

    ``~`` is expanded here because DuckDB expands it itself: a check that did not would look
    for the file elsewhere. A store is a local file: a URL would have DuckDB download code to
    reach it. ``:memory:`` only where ``memory`` (the Python API): a command or a notebook
    would lose what it appends there when it ends."""
    text = str(path)
    if text == ":memory:" and memory:
        return text
    if text.startswith(":memory:"):
        raise StoreError(
            f"{text!r} keeps the store in memory, where it is lost when this ends; pass the "
            "path of a .duckdb file (a new file name creates a store)"
        )
    if _SCHEME.match(text):
        raise StoreError(
            f"{text!r} is not a local file, and a store is one; pass the path of a .duckdb "
            f"file (./{text} for a local file whose name has a colon)"
        )
    return os.path.expanduser(text)


DB = Text("UAC_DB", "the store file of `uac` and `%uac open`", "`uac.duckdb`", StoreError)
USER = Text(
    "UAC_USER",
    "the user a command opens",
    "the store's only user; `me` in a new store",
    UnknownUser,
    printable=False,
)
LOCK_TIMEOUT = Seconds(
    "UAC_LOCK_TIMEOUT",
    "how long to wait for a store another process holds",
    "10",
    StoreError,
    zero=True,
)
SQL_TIMEOUT = Seconds(
    "UAC_SQL_TIMEOUT", "how long a SQL query may run", "30", QueryError, example="30"
)
SQL_MEMORY_MB = Count(
    "UAC_SQL_MEMORY_MB",
    "memory (MB) of the SQL view's database",
    "the smaller of 2048 and a quarter of the RAM",
    QueryError,
    most=2**24,  # 16 TiB
    example=2048,
)
SQL_THREADS = Count(
    "UAC_SQL_THREADS",
    "threads of the SQL view's database",
    "half the CPUs, 1 to 4",
    QueryError,
    most=1024,  # DuckDB would try to start as many threads as it is told
    example=4,
)
MODEL = Text("UAC_MODEL", "the model `extract` and `ask` call", "none", ModelError)
OFFLINE = Switch(
    "UAC_OFFLINE", "answer model calls only from the store's record", "off", ModelError
)
MODEL_DEADLINE = Seconds(
    "UAC_MODEL_DEADLINE",
    "seconds a model call may take in all, retries included",
    "120",
    ModelError,
    example="120",
)
OPENAI_BASE_URL = Url(
    "OPENAI_BASE_URL", "an OpenAI-compatible endpoint", "OpenAI's API", ModelError
)
OPENAI_API_KEY = Text(
    "OPENAI_API_KEY",
    "the endpoint's key",
    "a placeholder, for keyless local servers",
    ModelError,
    secret=True,
)
CACHE_DIR = Text(
    "UAC_CACHE_DIR",
    "where rebuildable files (the offline Vega bundle) are kept",
    "the platform's user cache directory",
    QueryError,
)
RAY_ADDRESS = Text(
    "RAY_ADDRESS",
    "the Ray cluster `uac fleet run --engine ray` joins",
    "a local Ray instance",
    FleetError,
)

SETTINGS: tuple[Setting, ...] = (
    DB,
    USER,
    LOCK_TIMEOUT,
    SQL_TIMEOUT,
    SQL_MEMORY_MB,
    SQL_THREADS,
    MODEL,
    OFFLINE,
    MODEL_DEADLINE,
    OPENAI_BASE_URL,
    OPENAI_API_KEY,
    CACHE_DIR,
    RAY_ADDRESS,
)


def table() -> str:
    """The Markdown table of every variable (the README holds it; a test keeps them equal)."""
    rows = ["| variable | sets | value | unset or empty |", "|---|---|---|---|"]
    rows += [f"| `{s.name}` | {s.meaning} | {s.kind} | {s.default} |" for s in SETTINGS]
    return "\n".join(rows)

"""The rule name of a constraint: ``constraint_`` and its key as a person reads it.

A key becomes a public Python identifier (checkpoint code binds each rule by its name): its
letters and digits, any script's, lower-cased and NFKC-normalised as Python normalises an
identifier, every other run of characters one ``_``, cut at a word to ``WORDS`` characters
(``rabies-for-pet-trips`` → ``constraint_rabies_for_pet_trips``; a key with no letter or digit
→ ``constraint_unnamed``). The ``constraint_`` prefix keeps a keyword (``class``) or a
module name (``date``) from being the name alone.

Two keys can read the same (``pet-trips``, ``pet_trips``): the first put in force keeps the
plain name and a later one gets ``_2`` (``_3`` …), so log order decides and a new constraint
never renames an older one's alerts. The name is chosen when a constraint is added, logged in
its event (``rule``) and kept for its key from then on (``uac_kernel.ingest.events``); an event
logged before names were chosen so has none, and its constraint keeps the name it had then
(``legacy_rule_name``), so a store's logged alerts keep matching their rule.

Only ``hashlib``, ``re`` and ``unicodedata`` here: the fold, below the constraints, reads it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection

__all__ = ["PREFIX", "WORDS", "free_rule_name", "legacy_rule_name", "rule_name"]

PREFIX = "constraint_"
# The most characters of the key kept in its name: enough to read in an alert's line.
WORDS = 48
UNNAMED = "unnamed"


def _word_char(c: str) -> bool:
    """Whether ``c`` may stand inside an identifier (after a letter): a letter or a digit of
    any script, or a mark that belongs to one."""
    return c != "_" and ("a" + c).isidentifier()


def rule_name(key: str) -> str:
    """``constraint_`` and ``key`` as an identifier a person reads, before any clash."""
    text = unicodedata.normalize("NFKC", key).casefold()
    text = unicodedata.normalize("NFKC", text)  # casefolding can undo the normal form
    words = "".join(c if _word_char(c) else " " for c in text).split()
    slug = ""
    for w in words:
        joined = f"{slug}_{w}" if slug else w
        if len(joined) > WORDS:
            slug = slug or w[:WORDS]  # one long word is cut; more words stop at a word
            break
        slug = joined
    name = PREFIX + (slug or UNNAMED)
    if not name.isidentifier() or unicodedata.normalize("NFKC", name) != name:
        return PREFIX + UNNAMED  # not expected: every character kept was checked
    return name


def free_rule_name(key: str, used: Collection[str]) -> str:
    """``rule_name(key)``, or with the first of ``_2``, ``_3`` … that makes it none of
    ``used`` (the names other keys have, and other rules')."""
    base = rule_name(key)
    name, n = base, 1
    while name in used:
        n += 1
        name = f"{base}_{n}"
    return name


_HASHED = re.compile(r"_[0-9a-f]{12}$")


def legacy_rule_name(key: str) -> str:
    """The name a constraint logged before names were chosen has: ``constraint_`` + the key
    when it is a lower-case identifier, else a slug of it and 12 hex digits of its hash."""
    slug = re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")[:48]
    if slug == key and not _HASHED.search(key):
        return f"constraint_{slug}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"constraint_{slug}_{digest}" if slug else f"constraint_{digest}"

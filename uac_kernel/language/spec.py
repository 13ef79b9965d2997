"""The constraint language: life-admin constraints as typed data, never code.

A constraint names the records it is about (``Select``: a type, optionally one key, field
values and words they mention) and the dates and quantities it needs (``Moment``: a date field
of a record, or a fixed date, shifted by days or months). Trusted code in
``uac_kernel.constraints.compile`` turns each into an ordinary rule; nothing in a constraint is
ever evaluated.

Six kinds, one discriminated union (``kind``):

- ``obligation``: something to do by a date, with a lead time, that stays an alert (escalating,
  then overdue) until a record says it is done;
- ``valid_on``: a document, policy or permit must be valid at a moment, or cover a whole span
  (coverage gaps between consecutive policies), derived from other records;
- ``window_limit``: a count, a sum or days present, in a rolling window or a calendar period,
  against a limit;
- ``projection``: a quantity that runs out at a rate, or a balance that planned flows take below
  a threshold, before a date;
- ``no_overlap`` / ``before``: two commitments that collide (with travel time and time zones),
  one thing that must happen before another;
- ``not_while``: X while Y: a food while a drug is active, an allergen in a planned meal, with
  knowledge tables kept as data (``uac_kernel.language.knowledge``).

Every string is bounded, every type and field name is checked like a fact's, unknown keys are
refused: a constraint that parses is safe to store, render and compile.

A field list a constraint leaves out (None) is not a list of names: the kind then reads concepts
(``document.expiry``, ``booking.start``) through the user's vocabulary, whose default names are
the ones constraints read before concepts existed; a list a constraint gives is read as written.
A ``Select`` may name a ``role`` (``trip``) instead of a type: the types playing it for the user.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)

from uac_kernel.core.display import close_matches
from uac_kernel.core.errors import ConstraintError
from uac_kernel.core.schema import check_field_name, check_type_name
from uac_kernel.vocab.catalogue import ROLES
from uac_kernel.vocab.resolve import types_of

__all__ = [
    "KINDS",
    "Before",
    "Constraint",
    "Moment",
    "NoOverlap",
    "NotWhile",
    "Obligation",
    "Projection",
    "Select",
    "ValidOn",
    "WindowLimit",
    "constraint_json",
    "parse_constraint",
]


def _has_a_word(v: str) -> str:
    # zero-width and punctuation-only text would be an invisible title or a term that matches
    # nothing (or, with its words removed, everything)
    if not any(ch.isalnum() for ch in v):
        raise ValueError("must contain a word (a letter or a digit)")
    return v


# A title or a quoted source is a sentence; a term is a word or two.
Text = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=300),
    AfterValidator(_has_a_word),
]
Term = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=80),
    AfterValidator(_has_a_word),
]
Scalar = bool | int | float | Annotated[str, StringConstraints(max_length=300)]
Severity = Literal["critical", "warning", "info"]
MAX_ITEMS = 50
WHERE_VALUE = (
    "a where value is a string, number or true/false (a string of at most 300 characters), or "
    f"a list of 1 to {MAX_ITEMS} of them"
)


def _where_value(v: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """One ``where`` value, refused as a whole: the error names the field and says what a value
    may be, not the branch of the union that failed last (``where.name.bool``)."""
    try:
        return handler(v)
    except ValidationError:
        raise ValueError(WHERE_VALUE) from None


WhereValue = Annotated[
    Scalar | Annotated[list[Scalar], Field(min_length=1, max_length=MAX_ITEMS)],
    WrapValidator(_where_value),
]
# Alert categories the engine gives its own alerts (a rule that fails).
RESERVED_CATEGORIES = frozenset({"rule_error"})


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _type_name(v: str) -> str:
    if (why := check_type_name(v)) is not None:
        raise ValueError(why)
    return v


def _field_name(v: str) -> str:
    if (why := check_field_name(v)) is not None:
        raise ValueError(why)
    return v


TypeName = Annotated[str, Field(max_length=100)]
FieldName = Annotated[str, Field(max_length=100)]
# Fields a constraint names, read as written; None (left out): the kind's concepts.
Fields = Annotated[list[FieldName], Field(max_length=10)] | None


class Select(_Model):
    """The current records a constraint is about.

    ``type`` alone: every current record of the type; ``also``: of these types too (the types
    extractors use for one thing: Expense and Transaction; ``type`` may be given as a list, its
    first name then ``type`` and the rest ``also``). ``role`` (``trip``, ``document``): of every
    type that plays it for the user, whatever they call it, besides ``type`` and ``also``; a
    constraint needs ``type`` or ``role``. ``key``: that one record (of any of them).
    ``where``: field values the record must have (strings compare case-insensitively; a list of
    values: any of them; a list field of the record: any of its members; ``country``,
    ``countries``, ``destination``, ``nationality`` and a field bound to a country concept compare
    by country, so ``UK`` matches ``United Kingdom``). ``mentions``: words the record's text fields must name (whole words,
    case-insensitive, any of them).
    """

    type: TypeName | None = None
    role: Annotated[str, Field(max_length=60)] | None = None
    key: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    where: dict[FieldName, WhereValue] = Field(default_factory=dict, max_length=10)
    mentions: list[Term] = Field(default_factory=list, max_length=MAX_ITEMS)
    also: list[TypeName] = Field(default_factory=list, max_length=10)

    @field_validator("type")
    @classmethod
    def _check_type(cls, v: str | None) -> str | None:
        return v if v is None else _type_name(v)

    @field_validator("role")
    @classmethod
    def _check_role(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if v not in ROLES:
            hint = "".join(f"; did you mean {c!r}?" for c in close_matches(v, list(ROLES)))
            raise ValueError(f"no role {v!r}{hint}; `uac vocab roles` lists them")
        if ROLES[v].any:
            raise ValueError(f"every type plays role {v!r}; name a type, or a narrower role")
        return v

    @model_validator(mode="after")
    def _names_records(self) -> Select:
        if self.type is None and self.role is None:
            raise ValueError("a select needs a type (e.g. Trip) or a role (e.g. trip)")
        return self

    @field_validator("also")
    @classmethod
    def _check_also(cls, v: list[str]) -> list[str]:
        for name in v:
            _type_name(name)
        return v

    @model_validator(mode="before")
    @classmethod
    def _type_list(cls, data: Any) -> Any:
        """``type: [A, B]`` is ``type: A, also: [B]``."""
        if isinstance(data, dict) and isinstance(t := data.get("type"), list) and t:
            also = data.get("also", [])
            data = {
                **data,
                "type": t[0],
                "also": [*t[1:], *(also if isinstance(also, list) else [also])],
            }
        return data

    @property
    def named(self) -> tuple[str, ...]:
        """The types the select names: ``type`` then ``also``, each once."""
        return tuple(dict.fromkeys([*([self.type] if self.type else []), *self.also]))

    @property
    def types(self) -> tuple[str, ...]:
        """Every type the select reads: those it names, then those playing its ``role`` in the
        vocabulary in force (a rule call's: the user's)."""
        played = types_of(self.role) if self.role is not None else ()
        return tuple(dict.fromkeys([*self.named, *played]))

    @field_validator("where")
    @classmethod
    def _check_where(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            _field_name(name)
        return v


class Moment(_Model):
    """A date: the first set of ``fields`` of the record in question; when none is set and
    ``start`` is given, the end a stated length gives (the first set ``start`` date plus the
    first set number of ``length``, days counted with both ends, so ``days: 10`` ends 9 days
    after the start, or of ``nights``, so ``nights: 10`` ends 10 days after it; left out, the
    concepts ``trip.length_days`` and ``trip.nights``: ``days`` and ``nights`` unless the user's
    vocabulary binds others); else the fixed ``date``. Then shifted by ``days`` and ``months``
    (negative for before)."""

    fields: list[FieldName] = Field(default_factory=list, max_length=10)
    # the years rules read in records (1001-8999: 9999-12-31 often means "never"); with the
    # bounded shifts below, a moment never leaves the calendar
    date: dt.date | None = None
    days: int = Field(default=0, ge=-36_600, le=36_600)
    months: int = Field(default=0, ge=-1_200, le=1_200)
    start: list[FieldName] = Field(default_factory=list, max_length=10)
    length: Fields = None
    nights: Fields = None

    @field_validator("fields", "start", "length", "nights")
    @classmethod
    def _check_fields(cls, v: list[str] | None) -> list[str] | None:
        for name in v or ():
            _field_name(name)
        return v

    @field_validator("date")
    @classmethod
    def _in_the_calendar(cls, v: dt.date | None) -> dt.date | None:
        if v is not None and not 1000 < v.year < 9000:
            raise ValueError("must be a date in the years 1001 to 8999")
        return v

    @model_validator(mode="after")
    def _needs_a_date(self) -> Moment:
        if not self.fields and not self.start and self.date is None:
            raise ValueError("a moment needs fields (a record's date fields), start or a date")
        return self


class _Base(_Model):
    """What every constraint has: a title (what a person would say), severity, lead time."""

    title: Text
    severity: Severity = "warning"
    category: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,59}$")] = "constraint"
    lead_days: int = Field(default=14, ge=0, le=3_660)
    cites: Text | None = None  # where the rule comes from: "the user", a regulation, a label

    @field_validator("category")
    @classmethod
    def _not_reserved(cls, v: str) -> str:
        if v in RESERVED_CATEGORIES:
            raise ValueError(f"{v!r} is reserved for the engine's own alerts; name another")
        return v


class Obligation(_Base):
    """Do something by a date. Alerts from ``lead_days`` before ``due`` (info, then warning,
    then critical in the last days) and, once the date passes undone, stays critical and says
    how many days overdue, until the subject record has one of ``done`` set true (or a
    ``status`` naming it) or a record matching ``done_by`` exists.

    ``subject`` may be omitted for an obligation with a fixed ``due.date`` ("file by the 15th").
    """

    kind: Literal["obligation"] = "obligation"
    subject: Select | None = None
    due: Moment
    done: list[FieldName] = Field(default_factory=list, max_length=20)
    done_by: Select | None = None


class ValidOn(_Base):
    """A ``document`` (passport, visa, policy, permit) must be valid at ``at`` of each record of
    ``each`` (e.g. a trip's end plus 6 months), or, with ``until``, cover every day from ``at``
    to ``until`` — together: several consecutive documents may cover the span, and a gap
    between them is an alert. A document is valid from its first set ``starts`` field (unset:
    since ever) to its first set ``expires`` field (unset: for good), unless one of ``lapsed``
    is true (cancelled, lapsed): then it covers nothing. Left out, these read the concepts
    ``document.valid_from``, ``document.expiry`` and ``document.void`` (see ``kinds.validity``).

    ``match`` ties a document to whom (or what) it is for: document field -> ``each`` record
    field, e.g. ``{"holder": "travellers"}``. Only documents whose field has the record's value
    count; a list on the ``each`` side means each of its members needs a document of their own
    (every traveller their own passport). An ``each`` record that leaves the field unset asks for
    any document, as without ``match``.
    """

    kind: Literal["valid_on"] = "valid_on"
    document: Select
    each: Select
    at: Moment
    until: Moment | None = None
    starts: Fields = None
    expires: Fields = None
    lapsed: Fields = None
    match: dict[FieldName, FieldName] = Field(default_factory=dict, max_length=5)

    @field_validator("match")
    @classmethod
    def _check_match(cls, v: dict[str, str]) -> dict[str, str]:
        for doc_field, each_field in v.items():
            _field_name(doc_field)
            _field_name(each_field)
        return v


class WindowLimit(_Base):
    """A count, sum or days present of ``subject`` records in a window, against ``limit``.

    ``measure``: ``count`` (records dated in the window), ``sum`` (of ``amount``), ``days``
    (days covered from ``date`` to ``end``, both inclusive). The window is ``window_days`` long
    and rolling (any window that ends on a day a record covers), or a calendar ``period``
    (``month``, ``year``, or ``year_from`` a month-day such as ``04-06`` for a UK tax year).
    Planned (future) records count: the alert comes when a plan would break the limit, and
    ``warn_at`` (a share of the limit) warns before it does. Left out, ``date``, ``end`` and
    ``amount`` read concepts (``event.date``, ``booking.start``, ``trip.start``; ``booking.end``,
    ``trip.end``; ``payment.amount``).
    """

    kind: Literal["window_limit"] = "window_limit"
    subject: Select
    measure: Literal["count", "sum", "days"]
    amount: FieldName | None = None
    date: Fields = None
    end: Fields = None
    window_days: int | None = Field(default=None, ge=1, le=3_660)
    period: Literal["month", "year"] | None = None
    year_from: Annotated[str, StringConstraints(pattern=r"^\d\d-\d\d$")] | None = None
    limit: float = Field(ge=0)
    warn_at: float | None = Field(default=None, gt=0, le=1)

    @field_validator("year_from")
    @classmethod
    def _a_day_of_the_year(cls, v: str | None) -> str | None:
        if v is not None:
            try:  # 2000 is a leap year, so 02-29 is a day of the year
                dt.date.fromisoformat(f"2000-{v}")
            except ValueError:
                raise ValueError(f"{v!r} is not a day of the year (MM-DD, e.g. 04-06)") from None
        return v

    @model_validator(mode="after")
    def _needs_a_window(self) -> WindowLimit:
        if self.window_days is None and self.period is None and self.year_from is None:
            raise ValueError(
                "a limit needs a window to count in: window_days (e.g. 180) or period "
                "(month, year) or year_from (e.g. 04-06)"
            )
        return self


class Projection(_Base):
    """A quantity that runs out, or a balance that planned flows take below a threshold.

    Runs out: ``subject``'s ``quantity`` (e.g. pills left), counted on its ``as_of`` date (unset:
    when the record was last changed), falls by ``rate`` (or the product of the ``rate_fields``,
    e.g. ``dose_count`` x ``times_per_day``) per ``per``; the alert comes when it reaches
    ``threshold`` before ``until`` (a Moment of ``until_record``, or of the subject itself, e.g.
    ``next_refill``; or of each record of ``until_record``, e.g. the end of every coming trip).

    Balance: with ``flows``, the records whose ``flow_amount`` (outflows positive; ``inflow``
    true or a negative amount: money in) dated up to ``until`` are taken from the quantity.
    Left out, ``as_of``, ``flow_amount`` and ``flow_date`` read the concepts ``record.as_of``,
    ``payment.amount`` and ``event.date`` then ``duty.due``.
    """

    kind: Literal["projection"] = "projection"
    subject: Select
    quantity: FieldName
    as_of: Fields = None
    rate: float | None = Field(default=None, ge=0)
    rate_fields: list[FieldName] = Field(default_factory=list, max_length=5)
    per: Literal["day", "week", "month"] = "day"
    flows: Select | None = None
    flow_amount: FieldName | None = None
    flow_date: Fields = None
    threshold: float = 0
    until: Moment
    until_record: Select | None = None

    @model_validator(mode="after")
    def _needs_a_rate(self) -> Projection:
        if self.flows is None and self.rate is None and not self.rate_fields:
            raise ValueError("a quantity that runs out needs rate or rate_fields (or flows)")
        return self


class NoOverlap(_Base):
    """No record of ``a`` may overlap one of ``b`` (``b`` unset: another of ``a``), with
    ``buffer_minutes`` of travel or handover time between them. Times may carry an offset; a
    record's ``tz`` field (an offset like ``+09:00``) places a naive time in its zone. Weekly
    commitments (a weekday with ``start_time``/``end_time``) collide on their occurrences.
    Left out, ``start`` and ``end`` read the concepts ``booking.start``, ``trip.start`` then
    ``event.date``, and ``booking.end``, ``trip.end``."""

    kind: Literal["no_overlap"] = "no_overlap"
    a: Select
    b: Select | None = None
    start: Fields = None
    end: Fields = None
    buffer_minutes: int = Field(default=0, ge=0, le=7 * 24 * 60)


class Before(_Base):
    """Each record of ``then`` needs a record of ``first`` dated at least ``gap_days`` before
    it (a vaccination before a trip, a visa appointment before the flight, a deposit before the
    move-in date); alerts from ``lead_days`` before ``then`` while none is, and at once when the
    only ones logged are dated too late. Left out, ``first_date`` reads the concepts
    ``event.date``, ``booking.start``, ``trip.start`` then ``duty.due``, and ``then_date``
    ``booking.start``, ``trip.start`` then ``event.date``."""

    kind: Literal["before"] = "before"
    first: Select
    then: Select
    first_date: Fields = None
    then_date: Fields = None
    gap_days: int = Field(default=0, ge=0, le=3_660)


class NotWhile(_Base):
    """No record of ``forbidden`` while a record of ``active`` stands: a food or a drug while a
    drug is taken, an allergen in a planned meal. ``active`` counts while current and not ended
    (its ``end`` fields, ``active`` false, ``stopped``); ``forbidden`` counts when undated or
    dated while ``active`` is. Words to look for in ``forbidden``'s text come from its
    ``mentions``, plus the named ``groups`` of a knowledge ``table`` (e.g. table ``allergens``,
    group ``shellfish``: crab, shrimp, lobster…; a table without groups: all of its groups).
    ``active_groups``: groups the active record's text must mention too (e.g. ``statins``),
    looked up in ``table`` first, then in any table. An unknown table or group is refused here,
    when the constraint is parsed, so it is never logged."""

    kind: Literal["not_while"] = "not_while"
    active: Select
    forbidden: Select
    table: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,59}$")] | None = None
    groups: list[Term] = Field(default_factory=list, max_length=MAX_ITEMS)
    active_groups: list[Term] = Field(default_factory=list, max_length=MAX_ITEMS)

    @field_validator("table", "groups", "active_groups")
    @classmethod
    def _known_groups(cls, v: Any, info: ValidationInfo) -> Any:
        # Imported here: the tables import the rule library, which may one day import this module.
        from uac_kernel.language.knowledge import problem

        table = v if info.field_name == "table" else info.data.get("table")
        if (why := problem(table, [] if info.field_name == "table" else v)) is not None:
            raise ValueError(why)
        return v


Constraint = Annotated[
    Obligation | ValidOn | WindowLimit | Projection | NoOverlap | Before | NotWhile,
    Field(discriminator="kind"),
]
KINDS: tuple[str, ...] = (
    "obligation",
    "valid_on",
    "window_limit",
    "projection",
    "no_overlap",
    "before",
    "not_while",
)
_ADAPTER: TypeAdapter[Constraint] = TypeAdapter(Constraint)


def parse_constraint(obj: Any, where: str = "constraint") -> Constraint:
    """``obj`` (a dict from JSON/YAML, or a constraint) as a validated constraint.

    Raises ``ConstraintError`` naming ``where`` and the first bad field.
    """
    if isinstance(obj, _Base):
        obj = obj.model_dump(mode="json")
    if not isinstance(obj, dict):
        why = f"a constraint is an object with a kind ({', '.join(KINDS)}) and its fields"
        raise ConstraintError(f"{where}: {why}", reason=why)
    try:
        return _ADAPTER.validate_python(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        at = ".".join(str(p) for p in err["loc"] if p not in KINDS)
        # a check of the whole constraint (no field of its own) is named by its kind
        at = at or (str(obj.get("kind")) if err["type"] == "value_error" else "kind")
        why = f"{err['msg']}; see docs/constraints.md"
        raise ConstraintError(f"{where}: {at}: {why}", field=at, reason=why) from None


def constraint_json(c: Constraint) -> dict[str, Any]:
    """``c`` as the JSON object logged and rendered (defaults left out, so it stays short)."""
    out = c.model_dump(mode="json", exclude_defaults=True)
    out["kind"] = c.kind
    return out

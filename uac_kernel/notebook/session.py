"""The state `%uac` keeps between cells: its settings (traitlets of ``UacMagics``), the open
workbench, and how results are shown."""

from __future__ import annotations

import re
from argparse import ArgumentTypeError
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics
from IPython.display import display
from traitlets import Bool, Float, Int, Unicode, default, observe

from uac_kernel.commands.types import seconds
from uac_kernel.core import settings
from uac_kernel.core.display import plural, printable
from uac_kernel.core.errors import ModelError
from uac_kernel.notebook.subcommands import _SUBCOMMAND, _unquote
from uac_kernel.render.reports import AlertReport, report_lines

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from uac_kernel.engine.whatif import WhatIf
    from uac_kernel.model.client import ModelSettings
    from uac_kernel.workbench import Workbench

__all__ = ["Session"]


class Session(Magics):
    """Settings and the open workbench; the subcommand mixins build on it."""

    db = Unicode(help="the store opened by `%uac open` without a path (env UAC_DB)").tag(
        config=True
    )

    user = Unicode(
        help="the user opened by `%uac open` without --user (env UAC_USER; '': the store's "
        "only user, or 'me' in a new store)"
    ).tag(config=True)

    variable = Unicode(
        "wb", help="the name the open Workbench is bound to in the user namespace ('' for none)"
    ).tag(config=True)

    displaylimit = Int(20, help="rows shown of a SQL result, a history or the log (0: all)").tag(
        config=True
    )

    sql_timeout = Float(
        None,
        allow_none=True,
        help="seconds a `sql` query may run (None: env UAC_SQL_TIMEOUT, else 30; "
        "`%uac sql --timeout S ...` for one query)",
    ).tag(config=True)

    cpu_seconds = Float(5.0, help="CPU seconds an `eval` expression may use").tag(config=True)

    memory_mb = Int(1024, help="memory (MB) an `eval` expression may use").tag(config=True)

    model = Unicode("", help="model for extract/ask ('' : env UAC_MODEL)").tag(config=True)

    base_url = Unicode("", help="OpenAI-compatible endpoint ('' : env OPENAI_BASE_URL)").tag(
        config=True
    )

    offline = Bool(
        False, help="answer model calls only from the store's record (else env UAC_OFFLINE)"
    ).tag(config=True)

    @default("db")
    def _default_db(self) -> str:
        return settings.DB.get() or "uac.duckdb"

    @default("user")
    def _default_user(self) -> str:
        return settings.USER.get() or ""

    def __init__(self, shell: InteractiveShell | None = None, **kwargs: Any):
        self.workbench: Workbench | None = None  # before the config observers can run
        self._charts_ready = False
        super().__init__(shell, **kwargs)
        self.commands: dict[str, tuple[Callable[[str, str | None], Any], bool]] = {}
        for attr in dir(type(self)):
            command = getattr(getattr(type(self), attr), _SUBCOMMAND, None)
            if command is not None:
                for name in (command.name, *command.aliases):
                    self.commands[name] = (getattr(self, attr), command.cell)

    @observe("db", "user", "model", "base_url", "offline")
    def _settings_changed(self, change: dict[str, Any]) -> None:
        if self.workbench is not None:
            print(f"uac: {change['name']} applies from the next `%uac open`")

    def _model_settings(self) -> ModelSettings | None:
        """Configured model settings; ``None`` leaves them to the environment at first use."""
        from uac_kernel.model.client import ModelSettings

        if not (self.model or self.base_url or self.offline):
            return None
        try:
            return ModelSettings.resolve(
                model=self.model or None,
                base_url=self.base_url or None,
                offline=True if self.offline else None,
            )
        except ModelError:
            return None  # no model named anywhere: the engine says so when one is needed

    def _open(self, path: str, user: str, read_only: bool = False) -> Workbench:
        """Open ``user`` ('': the store's only user) of ``path``; read-only, a user with no
        events is an error, as nothing could be read or written."""
        from uac_kernel.workbench import Workbench

        path = settings.store_path(path, memory=False)
        self._close()
        wb = Workbench(path, user=user or None, read_only=read_only, model=self._model_settings())
        self.workbench = wb
        if self.variable and self.shell is not None:
            self.shell.push({self.variable: wb})
        print(self._summary(wb))
        return wb

    def _close(self) -> None:
        wb, self.workbench = self.workbench, None
        if wb is None:
            return
        wb.close()
        if self.shell is not None and self.variable and self.shell.user_ns.get(self.variable) is wb:
            del self.shell.user_ns[self.variable]

    def release_store(self, *_: object) -> None:
        """Keep the open workbench's store until another process asks for it (an IPython
        ``post_run_cell`` hook, after a cell that used the store outside an operation)."""
        if self.workbench is not None:
            self.workbench.store.release(keep=True)

    def _wb(self, *, read: bool = False) -> Workbench:
        """The open workbench; opens the configured store and user if none is.

        ``read``: the subcommand reads the user, so a user with no events is an error that
        names the store's users (a typo in --user, not an empty history).
        """
        if self.workbench is None:
            wb = self._open(self.db, self.user)
        else:
            wb = self.workbench
            wb.refresh()  # a terminal may have written since the last cell
        if read:
            wb.require_known()
        return wb

    def _summary(self, wb: Workbench) -> str:
        counts = wb.state.counts()
        checkpoints = wb.checkpoints.all()
        alerts = wb.alerts()
        critical = sum(1 for a in alerts if a.severity == "critical")
        cps = (
            f"{plural(len(checkpoints), 'checkpoint')} (latest {checkpoints[-1].version})"
            if checkpoints
            else "no checkpoint yet"
        )
        text = (
            f"uac: user {wb.user!r} of {wb.store.path}{' (read-only)' if wb.store.read_only else ''}"
            f": {plural(sum(counts.values()), 'record')} in {plural(len(counts), 'type')}, {cps}, "
            f"{plural(len(alerts), 'standing alert')}{f' ({critical} critical)' if critical else ''}"
        )
        if self.variable:
            text += f"; bound to `{self.variable}`"
        if not wb.known:
            users = ", ".join(wb.store.users()) or "none yet"
            text += (
                f"\n     user {wb.user!r} has no events yet (users here: {users}); "
                "`%uac ingest FILE` adds them, `%uac open --user NAME` opens another"
            )
        idle = [r["name"] for r in wb.stored_rules() if r["name"] not in wb.runner.rules]
        if idle:
            text += (
                f"\n     notebook rules logged but not in force: {', '.join(idle)} — "
                "`%uac edit rules` shows their code; run that cell to put them in force"
            )
        return text

    def _timeout_option(self, rest: str) -> tuple[float | None, str]:
        """A leading `--timeout S` (else ``sql_timeout``; ``None`` leaves it to the
        environment) and the rest of the line as written."""
        match = re.match(r"\s*--timeout[ =](\S+)\s*", rest)
        if not match:
            return self.sql_timeout, rest
        try:
            return seconds(_unquote(match.group(1))), rest[match.end() :]
        except ArgumentTypeError as exc:
            raise UsageError(f"argument --timeout: {exc}") from None

    def _show_whatif(self, wb: Workbench, w: WhatIf, head: Sequence[str] = ()) -> None:
        """The what-if's report: its widget (with the Apply button) when there is one, else
        the text and HTML; ``head`` lines come first. Once Apply is pressed the display is
        sent again, so its text/plain (what a saved notebook shows) says what was appended."""
        from uac_kernel.render.whatif_face import report_html, report_lines

        if head:
            print("\n".join(printable(h) for h in head))

        def make() -> Any:
            from uac_kernel.notebook.widgets_act import WhatIfWidget

            return WhatIfWidget(wb, w)

        self._show(make, "\n".join(report_lines(w)), report_html(w), again_on="applied")

    def _show(
        self,
        make: Callable[[], Any],
        text: str,
        html_text: str | None = None,
        again_on: str | None = None,
    ) -> None:
        """Display a widget with ``text`` as its text/plain fallback; only the text when the
        widget cannot be made (anywidget not installed). A change of the widget's trait
        ``again_on`` sends the display again (an update of the same output), with the text the
        widget's own ``_repr_mimebundle_`` gives then."""
        try:
            widget = make()
        except ImportError as exc:
            bundle = {"text/plain": text}
            if html_text is not None:
                bundle["text/html"] = html_text
            display(bundle, raw=True)
            print(f"(the interactive view needs anywidget: {exc})")
            return
        formatter = self.shell.display_formatter if self.shell is not None else None
        if formatter is None:
            display(widget)
            return
        data, metadata = formatter.format(widget)
        data["text/plain"] = text
        handle = display(data, metadata=metadata, raw=True, display_id=bool(again_on) or None)
        if again_on and handle is not None:
            widget.observe(lambda _change: handle.update(widget), names=again_on)

    @staticmethod
    def _print_report(report: AlertReport, prefix: str = "") -> None:
        for line in report_lines(report, prefix):
            print(line)

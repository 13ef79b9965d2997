"""The IPython face of uac: ``%load_ext uac``, then ``%uac SUBCOMMAND ...`` and ``%%uac``.

Parsing, display and error translation only: every action is one ``Workbench`` call. Settings
are traitlets of ``UacMagics`` (``%config UacMagics.db = "maya.duckdb"``); every ``UacError`` and
every argument error reaches the notebook as a one-line ``UsageError``.

The model as editable cells: ``%uac edit Medication`` turns its own cell into the ``Medication``
part of the latest checkpoint, headed by ``%%uac cell --version N --part Medication``. Edit the
records (or write ``@rule`` functions in the ``rules`` part) and run the cell: the body is read
by literals, never run, and becomes correction events; only the ``@rule`` functions you wrote
are compiled and run, to define the rules.
"""

from __future__ import annotations

import sys
import textwrap
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import line_cell_magic, magics_class, no_var_expand

from uac_kernel.commands.declare import MAGIC
from uac_kernel.core.display import did_you_mean
from uac_kernel.core.errors import UacError
from uac_kernel.model.ask import Answer
from uac_kernel.notebook.askline import ask_line
from uac_kernel.notebook.imports import import_in_background
from uac_kernel.notebook.magics_code import CodeMagics
from uac_kernel.notebook.magics_log import LogMagics
from uac_kernel.notebook.magics_model import ModelMagics
from uac_kernel.notebook.magics_query import CHART_MODULES, QueryMagics
from uac_kernel.notebook.subcommands import _command, _doc, _one_line, _usage
from uac_kernel.notebook.tables import Table
from uac_kernel.render.answer import answer_html, answer_lines
from uac_kernel.render.listings import sql_listing
from uac_kernel.sql.view import SqlResult

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell


__all__ = ["UacMagics", "load_ipython_extension", "unload_ipython_extension"]


# -- the magics ---------------------------------------------------------------------------------


@magics_class
class UacMagics(LogMagics, CodeMagics, QueryMagics, ModelMagics):
    """``%uac SUBCOMMAND ...`` and ``%%uac SUBCOMMAND``: the workbench in a notebook.

    Settings: ``%config UacMagics`` lists them; ``%uac help`` lists the subcommands.
    """

    # -- dispatch ---------------------------------------------------------------------------

    @no_var_expand
    @line_cell_magic
    def uac(self, line: str, cell: str | None = None) -> Any:
        """``%uac SUBCOMMAND [ARGS]``; ``%uac help`` lists the subcommands, ``%uac help SUB``
        (or ``%uac SUB --help``) explains one. Lines are taken verbatim: no ``{var}`` or
        ``$var`` expansion, so Python sets, dicts and strings in expressions stay intact."""
        name, rest = [*line.strip().split(None, 1), "", ""][:2]
        if not name or name in ("help", "-h", "--help"):
            self._help(rest.strip())
            return None
        found = self.commands.get(name)
        if found is None:
            raise UsageError(
                f"%uac has no subcommand {name!r}.{did_you_mean(name, list(self.commands))} "
                f"Subcommands: {', '.join(sorted(self.commands))}"
            )
        fn, takes_cell = found
        if rest.strip() in ("-h", "--help"):
            print(_doc(fn))
            return None
        if cell is not None and not takes_cell:
            raise UsageError(f"`%%uac {name}` takes no cell body; use the line magic `%uac {name}`")
        try:
            return fn(rest, cell)
        except UacError as exc:
            raise UsageError(_one_line(str(exc))) from None
        except Exception as exc:
            # A damaged store is found when a query reaches the bad block: one line too.
            duckdb = sys.modules.get("duckdb")
            if duckdb is None or not isinstance(exc, duckdb.Error):
                raise
            from uac_kernel.log.store import damaged

            path = self.workbench.store.path if self.workbench is not None else self.db
            raise UsageError(_one_line(str(damaged(path, exc)))) from None

    def _help(self, name: str) -> None:
        if name:
            found = self.commands.get(name)
            if found is None:
                raise UsageError(
                    f"%uac has no subcommand {name!r}.{did_you_mean(name, list(self.commands))}"
                )
            print(_doc(found[0]))
            return
        print("%uac SUBCOMMAND [ARGS] — the User as Code workbench (settings: %config UacMagics)")
        print("A %%uac line heads a cell whose body the subcommand reads, where one is shown.")
        names: dict[Any, list[str]] = {}  # a command's method -> the names it answers to
        for name, (fn, _) in sorted(self.commands.items()):
            names.setdefault(getattr(fn, "__func__", fn), []).append(name)
        for fn, called in sorted(names.items(), key=lambda item: item[0].parser.prog):
            usage = _usage(fn)
            others = [n for n in called if f"uac {n}" != fn.parser.prog]
            if others:
                also = f"(also: {', '.join(f'%uac {n}' for n in others)})"
                if len(usage[-1]) + 3 + len(also) <= 86:
                    usage[-1] += f"   {also}"
                else:
                    usage.append(" " * len(fn.parser.prog) + f"  {also}")
            for line in usage:
                print(f"  {line}")
            command = _command(fn)
            if command.cell_form is not None:  # the cell magic, and what its body holds
                form, holds = command.cell_form
                print(f"  {form}")
                print(f"{' ' * 8}(the cell: {holds})")
            # the line `uac --help` shows, but for options only the terminal has: one
            # declaration, both faces
            for line in textwrap.wrap(command.help_on(MAGIC), width=82):
                print(f"    {line}")
        print("%uac help SUBCOMMAND (or %uac SUBCOMMAND --help) explains one.")

    # -- the workbench ------------------------------------------------------------------------

    # -- subcommands ----------------------------------------------------------------------------

    # -- the model as editable cells ------------------------------------------------------------

    # -- what-ifs -------------------------------------------------------------------------------

    # -- widgets --------------------------------------------------------------------------------


def _register_formatters(ip: InteractiveShell, magics: UacMagics) -> None:
    """Engine results returned by a magic (or a plain cell) draw as tables and answers."""
    if ip.display_formatter is None:
        return
    formatters = ip.display_formatter.formatters

    def sql_table(result: SqlResult) -> Table:
        return Table.of(sql_listing(result), magics.displaylimit)

    formatters["text/html"].for_type(SqlResult, lambda r: sql_table(r)._repr_html_())
    formatters["text/plain"].for_type(SqlResult, lambda r, p, cycle: p.text(sql_table(r).text()))
    formatters["text/html"].for_type(Answer, answer_html)
    formatters["text/plain"].for_type(
        Answer, lambda a, p, cycle: p.text("\n".join(answer_lines(a)))
    )


def load_ipython_extension(ip: InteractiveShell) -> None:
    """``%load_ext uac``: register ``%uac`` / ``%%uac``, the display of engine results and
    the input transformer that lets ``%uac ask How many trips?`` end in ``?`` unquoted."""
    magics = UacMagics(shell=ip)
    ip.register_magics(magics)
    _register_formatters(ip, magics)
    # Every workbench operation releases the store; a cell that used `wb.store` directly is
    # released here, so the notebook never keeps a terminal out between cells.
    ip.events.register("post_run_cell", magics.release_store)
    # After IPython's own cleanup transforms, before its help (`obj?`) and magic handling.
    if ask_line not in ip.input_transformers_cleanup:
        ip.input_transformers_cleanup.append(ask_line)
    if not ip.custom_exceptions:  # a handler the user set stays theirs
        ip.set_custom_exc((UacError,), _one_line_error)
    # The first `%uac chart` imports Altair (~1.5 s); started now, on a thread, it is done or
    # partly done by then, while the user opens a store (bench/first_chart.py).
    import_in_background(*CHART_MODULES)


def _one_line_error(
    shell: InteractiveShell, etype: type, value: BaseException, tb: Any, tb_offset: Any = None
) -> list[str]:
    """A uac error raised by a call in a cell (``save_chart``, ``wb.ask``) shows as its one
    line, as a magic's ``UsageError`` does; ``%tb`` still shows where it was raised."""
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = value
    stb = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)
    return stb


def unload_ipython_extension(ip: InteractiveShell) -> None:
    """Close the open workbench and remove the magics, the result displays and the
    input transformer."""
    registry = ip.magics_manager.registry
    magics = registry.pop(UacMagics.__name__, None)
    if isinstance(magics, UacMagics):
        magics._close()
        if magics.release_store in ip.events.callbacks["post_run_cell"]:
            ip.events.unregister("post_run_cell", magics.release_store)
        if magics in ip.configurables:
            ip.configurables.remove(magics)  # type: ignore[arg-type]
    for kind in ("line", "cell"):
        ip.magics_manager.magics[kind].pop("uac", None)
    while ask_line in ip.input_transformers_cleanup:
        ip.input_transformers_cleanup.remove(ask_line)
    if ip.custom_exceptions == (UacError,):
        ip.set_custom_exc((), None)
    if ip.display_formatter is not None:
        for mime in ("text/html", "text/plain"):
            for typ in (SqlResult, Answer):
                ip.display_formatter.formatters[mime].pop(typ, None)

"""`%uac` subcommands that call a model: extract, review, ask."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import parse_argstring

from uac_kernel.core.faces import MAGIC
from uac_kernel.model.ask import Answer
from uac_kernel.notebook.session import Session
from uac_kernel.notebook.subcommands import _one_line, _unquote, subcommand
from uac_kernel.render.checkpoint import written_lines
from uac_kernel.render.review import accepted_lines, held_lines, rejected_line

__all__ = ["ModelMagics"]


class ModelMagics(Session):
    """`%uac` subcommands that call a model: extract, review, ask."""

    @subcommand("extract")
    def cmd_extract(self, rest: str, cell: str | None) -> None:
        """Turn pending utterances into typed facts with the model, then checkpoint. An answer
        that would change much of what is known is held: see ``%uac review``."""
        from uac_kernel.model.extract import ExtractionLimits

        args = parse_argstring(self.cmd_extract, rest)
        caps = {
            name: getattr(args, name)
            for name in ("max_operations", "max_new_types", "max_new_fields")
            if getattr(args, name) is not None
        }
        wb = self._wb(read=True)
        report = wb.extract(batch_size=args.batch_size, limits=ExtractionLimits(**caps))
        self._print_report(report)
        if report.applied:
            version = wb.checkpoints.get().version
            print("\n".join(written_lines(version, MAGIC, wb.parts(version))))

    @subcommand("review")
    def cmd_review(self, rest: str, cell: str | None) -> None:
        """Model answers held for review: a widget with each operation's record before and
        after, Accept / Accept selected / Reject (the text where widgets are not shown);
        ``accept ID [--only 1,3]`` or ``reject ID`` decides from the line."""
        from uac_kernel.model.review import parse_only

        args = parse_argstring(self.cmd_review, rest)
        wb = self._wb(read=True)
        if args.action is None:
            text = "\n".join(held_lines(wb.review()))

            def make() -> Any:
                from uac_kernel.notebook.widgets_act import ReviewView

                return ReviewView(wb)

            self._show(make, text)
            return
        if args.batch is None:
            raise UsageError(f"%uac review {args.action} needs the ID of a held batch")
        if args.action == "reject":
            wb.reject(args.batch)
            print(rejected_line(args.batch))
            return
        only = parse_only(args.only) if args.only is not None else None
        print("\n".join(accepted_lines(wb.accept(args.batch, only), args.batch, args.only)))

    @subcommand("ask")
    def cmd_ask(self, rest: str, cell: str | None) -> Answer:
        """Answer a question with code the model writes (run in the sandbox); shows the answer,
        the code and what it rests on, and returns the ``Answer``.

        The question is the rest of the line, taken as written: ``%uac ask How many trips did
        I take?`` (a line ending in ``?`` reaches ``%uac``, not IPython's help). ``%%uac ask``
        takes it as the cell body."""
        question = _unquote(cell if cell is not None else rest)
        if not question:
            raise UsageError(
                "usage: %uac ask QUESTION, or %%uac ask with the question as the cell body"
            )
        answer = self._wb(read=True).ask(question)
        if not answer.ok:
            raise UsageError(
                _one_line(
                    f"no answer after {answer.attempts} attempts: {answer.error} "
                    f"(last code: {answer.expression})"
                )
            )
        return answer

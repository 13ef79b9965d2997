"""`uac bench`: the aggregate, alert, vocabulary and LoCoMo benchmarks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from uac_kernel.cli.opening import MODEL_FLAGS

if TYPE_CHECKING:
    from uac_kernel.model.client import ModelSettings

__all__ = ["cmd_bench_aggregate", "cmd_bench_alerts", "cmd_bench_locomo", "cmd_bench_vocab"]


def _model(args: argparse.Namespace) -> ModelSettings | None:
    """The model a bench's model systems ask, when one is named (else they are left out)."""
    from uac_kernel.model.client import ModelSettings

    if not (args.model or args.base_url):
        return None
    return ModelSettings.resolve(
        model=args.model,
        base_url=args.base_url,
        offline=True if args.offline else None,
        spelled=MODEL_FLAGS,
    )


def cmd_bench_aggregate(args: argparse.Namespace) -> None:
    from uac_kernel.bench import aggregate

    model = _model(args)
    result = aggregate.run(
        sizes=args.sizes,
        seed=args.seed,
        k=args.k,
        model=model,
        out_dir=Path(args.out) if args.out else None,
        embeddings=not args.no_embeddings,
    )
    print(result.table())


def _sets(args: argparse.Namespace) -> tuple[str, ...]:
    """The alert scenario sets ``--set`` names."""
    return ("public", "holdout") if args.set == "all" else (args.set,)


def cmd_bench_alerts(args: argparse.Namespace) -> None:
    from uac_kernel.bench import alerts

    model = _model(args)
    bench = alerts.run_all(_sets(args), model=model, out_dir=Path(args.out) if args.out else None)
    print(bench.report(), end="")


def cmd_bench_vocab(args: argparse.Namespace) -> None:
    from uac_kernel.bench import respell, vocab_stress

    sets = _sets(args)
    if args.report:
        rows = [row for seed in args.seeds for row in respell.renamings(seed, sets)]
        print(respell.renamings_report(rows), end="")
        return
    result = vocab_stress.run(
        args.seeds, sets, blame=not args.no_blame, out_dir=Path(args.out) if args.out else None
    )
    print(result.report(), end="")


def cmd_bench_locomo(args: argparse.Namespace) -> None:
    from uac_kernel.bench import locomo

    model = locomo.resolve_settings(
        args.model, args.base_url, offline=True if args.offline else None
    )
    judge = None
    if args.judge_model:
        judge = locomo.resolve_settings(
            args.judge_model, args.base_url, offline=True if args.offline else None
        )
    db = Path(args.db) if args.db_given else Path("locomo.duckdb")
    result = locomo.run(
        args.path,
        model=model,
        db=db,
        samples=args.samples or None,
        limit=args.limit,
        out=args.out,
        judge=judge,
    )
    print(result.table())
    print(f"results: {result.json_path}   progress (resumable): {result.progress_path}")

"""The matcher's precision and recall of bindings on the vocabulary stress bench's renamings.

Every alert scenario re-spelt under each seed (the ground truth is
``uac_kernel.bench.respell.renamings``), the matcher run once over each re-spelt schema with its
values, its bindings counted right or wrong against the catalogue's defaults (see
``uac_kernel.bench.vocab_match``). Counts and per-concept aggregates only: never the new names.

    python bench/vocab_match.py [--seeds 0 1 2] [--set all] [--out bench/results]

Writes ``vocab_match.json`` and ``vocab_match.txt`` into ``--out`` and prints the table, whose
last line is the summary. See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from uac_kernel.bench.vocab_match import SEEDS, run

OUT = Path(__file__).resolve().parent / "results"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    ap.add_argument("--set", choices=("public", "holdout", "all"), default="all")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    sets = ("public", "holdout") if args.set == "all" else (args.set,)
    result = run(args.seeds, sets)
    result.write(args.out)
    print(result.table(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

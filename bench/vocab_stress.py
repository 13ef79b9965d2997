"""The vocabulary stress bench: the alert scenarios re-spelt (types and fields renamed through
synonyms, abbreviations, prefixes and naming styles, under several seeds), replayed as
``uac bench alerts`` replays them, library alone: does the library keep its score?

    python bench/vocab_stress.py [--seeds 0 1 2] [--set all] [--out bench/results] [--no-blame]
    python bench/vocab_stress.py --report --seeds 0      # the renamings, original -> new

The same as ``uac bench vocab`` (``uac_kernel.bench.vocab_stress``; the generator is
``uac_kernel.bench.respell``). Writes ``vocab_stress.json`` and ``vocab_stress.txt`` into
``--out``. See ``bench/README.md``.
"""

from __future__ import annotations

import sys

from uac_kernel.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["bench", "vocab", *sys.argv[1:]]))

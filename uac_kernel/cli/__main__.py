"""`python -m uac_kernel.cli`: the `uac` command without its console script."""

from uac_kernel.cli.main import run

run()

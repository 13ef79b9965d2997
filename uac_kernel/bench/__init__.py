"""Benchmarks that ship with the engine, run by ``uac bench ...`` (e.g.
``uac_kernel.bench.alerts``)."""

"""The lab: fitting, selection, evaluation, trace reading, simulation and SimGrid drivers.

The CLI and the benchmarks use it; ``hpcpredictd`` never imports it (``tests/daemon/test_layering.py``
holds the rule). What the lab hands the serving core is a model artifact: the registry layout
and each model kind's load format (:mod:`hpcpredict.daemon.model_kinds`). Everything else in
``daemon/`` outside ``lab/`` and ``cli/`` is the serving core: what runs under slurmctld's
300 ms budget.

Each family's package (:mod:`.runtime`, :mod:`.history`, :mod:`.comm`, :mod:`.scaling`,
:mod:`.scheduling`) is its public face: its ``__all__`` lists what the benchmarks and the CLI
call, and they import it from there rather than from the family's modules.
"""

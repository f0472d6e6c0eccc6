"""Walltime from job history, the lab: trace and accounting reading (:mod:`.traces`,
:mod:`.sacct`, :mod:`.swf`, :mod:`.pyslurm_source`, :mod:`.accounting`), fitting
(:mod:`.training`) and online evaluation (:mod:`.evaluation`).

The served model and its artifact are in :mod:`hpcpredict.daemon.history`.

What the family offers, and what the benchmarks and the ``evaluate walltime`` / ``ingest``
commands call:

* traces: :func:`read_trace` (SWF, sacct CSV / parsable / JSON, sniffed), :func:`read_sacct_json`;
* the online replay a trace is scored by: :func:`evaluate_trace`, :func:`replay`,
  :func:`scorable` (the jobs a replay can score), :func:`end_time`;
* fitting: :func:`train_model` (from records), :func:`train_from_store`.

The accounting sources (:mod:`.accounting`, :mod:`.pyslurm_source`) are
:mod:`hpcpredict.daemon.lab.refresh`'s.
"""
from .evaluation import end_time, evaluate_trace, replay, scorable
from .traces import read_sacct_json, read_trace
from .training import train_from_store, train_model

__all__ = ["end_time", "evaluate_trace", "read_sacct_json", "read_trace", "replay", "scorable",
           "train_from_store", "train_model"]

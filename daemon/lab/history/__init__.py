"""Walltime from job history, the lab: trace and accounting reading (:mod:`.traces`,
:mod:`.sacct`, :mod:`.swf`, :mod:`.pyslurm_source`, :mod:`.accounting`), fitting
(:mod:`.training`) and online evaluation (:mod:`.evaluation`).

The served model and its artifact are in :mod:`hpcpredict.daemon.history`.
"""

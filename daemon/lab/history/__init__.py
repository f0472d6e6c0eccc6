"""Walltime from job history: trace and accounting reading, evaluation (the served model is in daemon/history/)."""

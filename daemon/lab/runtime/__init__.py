"""The runtime-from-inputs learners: fitting, selection, evaluation (their served forms are in daemon/runtime/)."""

"""Communication-time models: datasets, fitting, evaluation, SimGrid drivers (served forms in daemon/comm/)."""

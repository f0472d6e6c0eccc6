"""Communication-time models as the daemon serves them: a MODEL_DIR loaded into
:class:`~.served.CommModelSet` and the request features it predicts from (fitting,
evaluation and SimGrid drivers are in daemon/lab/comm/)."""

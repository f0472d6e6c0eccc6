"""hpcpredictd: the prediction daemon, its store, model registry, models and CLI."""
__version__ = "0.1.0"

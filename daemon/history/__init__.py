"""Walltime from job history: trace readers, online predictors, our model, the evaluator.

Heavy imports (numpy) happen when the model/evaluator modules are first used.
"""
from __future__ import annotations

from .predictors import (
    BASELINES,
    AleaMax5Predictor,
    CesnetPredictor,
    EcmwfPredictor,
    Last2Predictor,
    OnlinePredictor,
    UserRequestPredictor,
)
from .traces import (
    read_sacct_csv,
    read_sacct_json,
    read_sacct_parsable,
    read_swf,
    read_trace,
)

__all__ = [
    "BASELINES", "AleaMax5Predictor", "CesnetPredictor", "EcmwfPredictor", "Last2Predictor",
    "OnlinePredictor", "UserRequestPredictor", "HpcPredictModel",
    "ModelParams", "read_sacct_csv", "read_sacct_json", "read_sacct_parsable", "read_swf",
    "read_trace", "train_model", "save_model", "load_model",
]

_LAZY = {"HpcPredictModel": "model", "ModelParams": "model", "train_model": "persist",
         "save_model": "persist", "load_model": "persist"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"hpcpredict.daemon.history.{_LAZY[name]}"), name)
    raise AttributeError(name)

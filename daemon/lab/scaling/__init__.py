"""Scaling models, the lab: measurements, modelers, fitting (the served advice is in
daemon/scaling/).

What the family offers, and what the benchmarks and ``hpcpredict scaling`` call:

* measurements: :func:`parse_jsonlines`, :func:`read_jsonlines` (:mod:`.measurements`),
  :func:`read_points_csv`;
* fitting: :func:`fit_all`, :func:`scaling_model` (the served advice's model), :func:`describe`
  (:mod:`.fitting`); modelers by name: :func:`get_modeler`, :func:`describe_modelers`
  (:mod:`.modelers`), :class:`AdaptiveModeler` and its :func:`pretrain` / :data:`PRETRAINED_PATH`
  (:mod:`.adaptive`), :func:`fit_regression` (:mod:`.regression`);
* performance-model normal form terms: :data:`EXPONENT_SET`, :func:`factor` (:mod:`.pmnf`);
* profiled runs (APMT): :class:`ProfiledRun`, :func:`decompose`, :func:`load_runs`
  (:mod:`.apmt`); :func:`parse_perf_stat`, :func:`parse_mpi_profile`,
  :func:`parse_function_times` (:mod:`.profiles`).
"""
from .adaptive import PRETRAINED_PATH, AdaptiveModeler, pretrain
from .apmt import ProfiledRun, decompose, load_runs
from .fitting import describe, fit_all, read_points_csv, scaling_model
from .measurements import parse_jsonlines, read_jsonlines
from .modelers import describe_modelers, get_modeler
from .pmnf import EXPONENT_SET, factor
from .profiles import parse_function_times, parse_mpi_profile, parse_perf_stat
from .regression import fit_regression

__all__ = [
    "AdaptiveModeler", "EXPONENT_SET", "PRETRAINED_PATH", "ProfiledRun", "decompose", "describe",
    "describe_modelers", "factor", "fit_all", "fit_regression", "get_modeler", "load_runs", "parse_function_times",
    "parse_jsonlines", "parse_mpi_profile", "parse_perf_stat", "pretrain", "read_jsonlines", "read_points_csv",
    "scaling_model",
]

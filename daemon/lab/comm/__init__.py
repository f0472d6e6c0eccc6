"""Communication-time models, the lab: datasets, fitting, evaluation, SimGrid drivers (served
forms in daemon/comm/).

What the package offers, and what the benchmarks and ``hpcpredict comm`` call:

* simulation: :func:`plan_points`, :func:`simulate` (:mod:`.simulate`), :func:`fabric_placement`
  (:mod:`.fabric`);
* ingestion: :func:`ingest_lines`, commbench output to records (:mod:`.commbench_ingest`);
* scoring: :func:`scores` (MMRE, PRED(25), RCC; :mod:`.accuracy`).

Fitting (:func:`.training.train_model_set`) and evaluation (:func:`.evaluation.evaluate`,
:func:`~.evaluation.predict_all`, :func:`~.evaluation.scatter_plots`) are imported from their
modules, not from here: :func:`simulate` runs :mod:`.simworker` as one child process per
simulation (``python -m``), which runs this file, and those two modules would add scikit-learn
and SciPy (about 2 s) to every child.
"""
from .accuracy import scores
from .commbench_ingest import ingest_lines
from .fabric import fabric_placement
from .simulate import plan_points, simulate

__all__ = ["fabric_placement", "ingest_lines", "plan_points", "scores", "simulate"]

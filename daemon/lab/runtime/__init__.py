"""The runtime-from-inputs learners, the lab: fitting, selection, evaluation (their served forms
are in daemon/runtime/).

What the family offers, and what the benchmarks and the CLI call:

* run tables: :func:`read_runs_csv`, :func:`parse_runs_csv` (:mod:`.dataset`);
  :func:`declared_derived`, the derived inputs a sweep recorded (:mod:`.applications`);
  :func:`usable_inputs`, the inputs kept (:mod:`.reduction`); :func:`runs_csv` and
  :data:`TARGET`, the run table of a store's runs (:mod:`.stored_runs`); :func:`agreeing_users`
  and :func:`user_disagreement`, whose runs may be pooled (:mod:`.agreement`);
* learners (scikit-learn API): :func:`make_learner` by name, :exc:`LearnerNotApplicable`
  (:mod:`.learners`); :class:`ANNEnsemble`, :class:`ExtraTreesRuntime`, :class:`TransferRuntime`;
  :class:`RuntimeModel`, an input encoder + learner (:mod:`.model`);
* selection and scoring: :data:`CANDIDATES`, :func:`select_learner`, :func:`without_calibration`,
  :func:`out_of_fold_predictions` (:mod:`.selection`); :func:`evaluate`,
  :func:`split_by_configuration`, :func:`served_predictions` (:mod:`.evaluation`); :func:`mape`,
  :func:`rank_accuracy`, :func:`repetition_disagreement`, :func:`coverage`,
  :func:`relative_width` (:mod:`.accuracy`); :func:`between_block_sigma`,
  :func:`repetition_mape_with_block_effect`, the repetition noise floor (:mod:`.noise_floor`);
* publishing: :func:`train_application` (what ``train-runtime`` publishes: pooled over the
  users whose runs agree, :mod:`.agreement`), :func:`fit_served` and :func:`worse_than_serving`,
  the check before publishing (:mod:`.training`); :func:`save_application_model`, a fitted learner packed into its artifact
  (:mod:`.packing`);
* which runs to do next: :func:`suggest_runs`, :func:`pick_diverse` (:mod:`.active`).

The other modules (:mod:`.loglinear`, :mod:`.startup_steps`, :mod:`.gaussian_process`,
:mod:`.boosting`, :mod:`.blend`, :mod:`.linear`: learners registered by name) are reached
through :func:`make_learner`; :mod:`.applications` holds one module of declarations per
application code.
"""
from .accuracy import coverage, mape, rank_accuracy, relative_width, repetition_disagreement
from .active import pick_diverse, suggest_runs
from .agreement import agreeing_users, user_disagreement
from .ann import ANNEnsemble
from .applications import declared_derived
from .dataset import parse_runs_csv, read_runs_csv
from .evaluation import evaluate, served_predictions, split_by_configuration
from .learners import LearnerNotApplicable, make_learner
from .model import RuntimeModel
from .noise_floor import between_block_sigma, repetition_mape_with_block_effect
from .packing import save_application_model
from .reduction import usable_inputs
from .selection import CANDIDATES, out_of_fold_predictions, select_learner, without_calibration
from .stored_runs import TARGET, runs_csv
from .training import fit_served, train_application, worse_than_serving
from .transfer import TransferRuntime
from .trees import ExtraTreesRuntime

__all__ = [
    "ANNEnsemble", "CANDIDATES", "agreeing_users", "user_disagreement", "ExtraTreesRuntime", "LearnerNotApplicable", "RuntimeModel", "TARGET",
    "TransferRuntime", "between_block_sigma", "coverage", "declared_derived", "evaluate", "fit_served",
    "make_learner", "mape", "out_of_fold_predictions", "parse_runs_csv", "pick_diverse", "rank_accuracy",
    "read_runs_csv", "relative_width", "repetition_disagreement", "repetition_mape_with_block_effect",
    "runs_csv", "save_application_model", "select_learner", "served_predictions", "split_by_configuration",
    "suggest_runs", "train_application", "usable_inputs", "without_calibration", "worse_than_serving",
]

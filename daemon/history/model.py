"""Our walltime model: per-user experts chosen online, with a conformal upper bound.

Point estimate (``time_min``). For a job whose user has ended jobs, several candidate
estimates ("experts") are built from that user's recent history (log seconds of occupancy):
a similarity-weighted *medoid* under the accuracy metric itself (the recent runtime that best
agrees with the others, weighting runs with the same request/size or application up and older
runs down), the last runtime, the last runtime of a run with the same request and size, the
last run of the same application, the median of the last five, the request, and the request x
the largest recent runtime/request ratio, the request x the last (or the most typical)
runtime/request ratio, and the median of the last three runs with the same request and size.
The ratio experts scale the request only on evidence that the user's runs follow it: a user whose
past requests all lie within ``ratio_evidence_factor`` (2) of each other, asking for one beyond
that, gets the runs' medoid from them (users who always ask 3 h and run 2.7 h, asking 12 h, are
predicted 2.7 h, not 81 % of 12 h; on KTH-SP2 and HPC2N the accuracy is unchanged to 0.001, where
scaling only by ratios of nearby requests lost up to 0.03).
Each expert's accuracy min(p, r)/max(p, r) is tracked per user (exponentially weighted) and over
all users. A learned selector picks the expert: one linear model per expert predicts its
accuracy on this job from the user's and the cluster's expert scores, how far each expert lies
from the others and from the request, and whether the user ran this request and size before;
the expert with the highest predicted accuracy is the *selected* estimate. The selector is
trained online (normalised least mean squares) only on jobs that have ended, each on the
features it had at submission. The answer is either that selected estimate or the *blend*: the
accuracy-optimal point p* = argmax_p sum_k w_k min(p, e_k)/max(p, e_k) over the experts e_k,
weighted by their predicted accuracy to the power 4 (the metric is piecewise convex between
the experts, so p* is one of them) — whichever of the two has scored better on the user's
ended jobs (exponentially weighted; the cluster's record for a user without one). A user
without history gets the request x the cluster's typical runtime/request ratio
(``fallback=True``).

Upper bound (``time_limit``) at risk a: split-conformal on the log residuals log(r / p) of the
selected estimate's recent predictions, made out of sample (each residual comes from the
estimate at the job's submission); it is never below the point answer. The policy only uses the
bound where it is below the request, and the jobs far below their request are the ones with the
widest residuals, so the bound is calibrated *on the jobs it would shorten*: each residual is
kept with its gap log(request / p), and the shift q above the estimate is the smallest one that
covers 1 - a of the past jobs whose gap exceeds q (:func:`shortening_shift`). The risk is thus
the probability that a job whose limit the bound shortened outlives it. Jobs come in batches (one
user's jobs with the same request and size, submitted within ``batch_window_s`` of each other):
they are predicted together, before any of them ends, and their errors are shared, so a batch
is one calibration unit (its worst residual) and the quantile and the minimum-count rule count
batches, the effective sample size, not jobs. Scores are kept per user
(used once a user has enough of them, and enough of those would have been shortened) and per
regime (with / without user history). Censored jobs (killed at their limit) are *not* scored:
their runtime is only known to be >= the limit, and the bound is capped at the request, so they
cannot be killed earlier by it. Because job streams drift, the level is adapted online
(adaptive conformal inference, Gibbs & Candès 2021): every job that the bound shortened and
that ended within its request moves the effective risk by ``adapt_rate x (risk - killed)``. A
job whose user has no relevant history keeps its request as bound (batches of identical jobs
submitted together break the exchangeability the calibration relies on).
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict, deque
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from .features import HistoryIndex, PastJob, occupancy_log
from ..estimates import RuntimeEstimate
from .predictors import DEFAULT_NO_REQUEST_S, OnlinePredictor
from ..records import JobRecord
from ..timefmt import human_range

EXPERTS = ("medoid", "last", "same_request", "same_application", "median5", "request", "max_ratio5",
           "ratio_last", "ratio_medoid", "same_request_median3")
_EXPERT_TEXT = {
    "medoid": "the most typical of your recent runs",
    "last": "your last run",
    "same_request": "your last run with this request and size",
    "same_application": "your last run of this application",
    "median5": "the median of your last 5 runs",
    "request": "your request (your runs have used about all of theirs)",
    "max_ratio5": "{share} of your request: the largest share of their request your last 5 runs used",
    "ratio_last": "{share} of your request: the share of its request your last run used",
    "ratio_medoid": "{share} of your request: the share of their request your runs typically use",
    "same_request_median3": "the median of your last 3 runs with this request and size",
}
# Experts that scale the request: without one they are the medoid (see _experts).
_SCALES_REQUEST = ("request", "max_ratio5", "ratio_last", "ratio_medoid")
# Selector inputs: bias, user experience, then per expert: user score, cluster score, offset from
# the experts' mean, distance to their median, user score minus the user's best, room below the
# request; last, whether the user ran this request and size before.
N_SELECTOR_FEATURES = 2 + 6 * len(EXPERTS) + 1
COLD, WARM = "cold", "warm"
_LOG_DEFAULT = math.log(DEFAULT_NO_REQUEST_S)
_INTERVAL = (0.1, 0.9)  # central interval reported as low/high (80 % nominal)
# Gap (log request - estimate) kept for a job without a request: its bound is always applied
# (as its --time), so it belongs to every shortened set. Finite to stay plain JSON.
NO_REQUEST_GAP = 50.0
_BATCH_RUNS_PER_USER = 8   # open (request, size) runs remembered per user for batching


@dataclass(frozen=True)
class ModelParams:
    """Hyper-parameters (stored with the model)."""

    history_depth: int = 24          # ended jobs remembered per user
    decay: float = 0.9               # medoid weight per step back in a user's history
    similar_weight: float = 3.0      # medoid weight of a run with the same request and size
    same_app_weight: float = 2.0     # ... with the same application
    expert_rate: float = 0.15        # per-user expert score update rate
    global_rate: float = 0.005       # cluster-wide expert score update rate
    min_user_scored: int = 3         # unused since the learned selector (kept: saved models name it)
    calibration_window: int = 4000   # residuals kept per regime
    user_window: int = 200           # residuals kept per user
    user_min: int = 40               # residuals before a user's own quantile is used
    ratio_window: int = 500          # recent runtime/request ratios for cold starts
    pending_limit: int = 200_000     # predictions remembered until their job ends
    new_request_factor: float = 4.0  # a request this far from all the user's past ones: cold start
    adapt_rate: float = 0.002        # adaptive conformal step (Gibbs & Candes 2021) on the risk
    min_shortened_outliers: float = 2.0  # a bound's calibration set holds >= this / risk - 1 shortened jobs
    selector_rate: float = 0.03      # NLMS step of the learned expert selector
    blend_power: float = 4.0         # blend weight = predicted accuracy ** this (0: never blend)
    blend_user_rate: float = 0.1     # per-user rate of the blend-minus-selected accuracy score
    blend_global_rate: float = 0.01  # ... cluster-wide (used for users without a score)
    # A user whose past requests all lie within this factor of each other, asking for one beyond
    # it: their runtime/request ratios are no evidence that their runs follow the request, so the
    # ratio experts give the runs' medoid (0: always scale the request).
    ratio_evidence_factor: float = 2.0
    batch_window_s: float = 600.0    # a job submitted this close to the last of a run of its user's jobs with
                                     # the same request and size joins that batch (0: every job is its own)


def conformal_quantile(ordered: np.ndarray, level: float) -> float:
    """The split-conformal quantile of sorted scores: the ceil((n+1) level)-th smallest
    (inf when there are too few scores for that level)."""
    n = len(ordered)
    rank = math.ceil((n + 1) * level)
    if rank > n or n == 0:
        return math.inf
    return float(ordered[max(rank, 1) - 1])


def shortening_shift(residuals: np.ndarray, gaps: np.ndarray, level: float, min_outliers: float = 1.0,
                     batches: np.ndarray | None = None) -> float:
    """The smallest log shift q whose bound (estimate + q) covers ``level`` of the jobs it would
    shorten: split-conformal among the scored jobs whose gap (log request - estimate) exceeds q.

    The bound is only applied where it is below the request (the policy leaves the others
    alone), and jobs far below their request are the ones with the widest residuals: a
    quantile over all jobs under-covers exactly the jobs it is used on. Selecting the
    calibration jobs by the same rule as the jobs it will shorten (gap > q) makes the kill
    rate among shortened jobs the target. inf when no q qualifies (too few shortened jobs
    for the level: at least ``min_outliers`` / (1 - level) - 1 of them; 1 is plain split
    conformal, 2 asks for the room of two outliers, which steadies a quantile taken from a
    user's few jobs). Only residual values need checking: between two of them the covered
    count can only fall.

    ``batches`` (optional, aligned): a batch id per job. The jobs of one batch (submitted
    together, same request and size) were predicted together and share their errors, so they
    are one calibration unit: its worst residual, shortened when any of its jobs is, outliving
    when any of its shortened jobs outlives q. Counts and the minimum-count rule are then in
    batches, the effective sample size, not in jobs.

    >>> r = np.array([0.0, 0.05, 0.1, 0.15, 2.0, 2.1])
    >>> shortening_shift(r, np.full(6, 9.0), 0.5), conformal_quantile(np.sort(r), 0.5)  # all shortened
    (0.15, 0.15)
    >>> gaps = np.array([0.1, 0.1, 0.1, 0.15, 9.0, 9.0])   # the first four ran close to their request
    >>> shortening_shift(r, gaps, 0.5)    # estimate + 0.15 would shorten only the last two: both outlive it
    2.1
    >>> shortening_shift(r, gaps, 0.8)    # too few shortened jobs to cover 80 %
    inf
    >>> shortening_shift(r, np.full(6, 9.0), 0.5, batches=[0, 1, 2, 3, 4, 4])  # the two wide ones: one batch
    2.1
    """
    return _shift_at(ShorteningScores.of(residuals, gaps, batches), level, min_outliers)


@dataclass(frozen=True)
class ShorteningScores:
    """Calibration scores sorted once for :func:`shortening_shift` (published, read-only)."""

    candidates: np.ndarray      # the residuals, sorted
    selected: np.ndarray        # per candidate q: how many jobs have a gap above q
    outliving: np.ndarray       # ... and also a residual above q

    @classmethod
    def of(cls, residuals, gaps, batches=None) -> "ShorteningScores":
        r = np.fromiter(residuals, float)
        g = np.fromiter(gaps, float)
        if len(g) != len(r):        # missing gaps: every job counts as shortened
            g = np.full(len(r), NO_REQUEST_GAP)
        outlive = np.minimum(g, r)  # above q: the job is shortened by q and outlives it
        if batches is not None:
            ids = np.fromiter(batches, np.int64)
            if len(ids) == len(r) and len(r):
                r, g, outlive = _worst_per_batch(ids, r, g, outlive)
        candidates = np.sort(r)
        n = len(r)
        return cls(candidates, n - np.searchsorted(np.sort(g), candidates, side="right"),
                   n - np.searchsorted(np.sort(outlive), candidates, side="right"))


def _worst_per_batch(ids: np.ndarray, *columns: np.ndarray) -> list[np.ndarray]:
    """Each column's maximum per batch id (one row per batch)."""
    order = np.argsort(ids, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(ids[order]) != 0])
    if len(starts) == len(ids):         # no batch of two or more: nothing to merge
        return list(columns)
    return [np.maximum.reduceat(column[order], starts) for column in columns]


def _shift_at(scores: ShorteningScores, level: float, min_outliers: float = 1.0) -> float:
    selected = scores.selected
    ok = ((selected > 0) & (selected >= min_outliers / (1.0 - level) - 1.0)
          & (selected - scores.outliving >= np.ceil((selected + 1) * level)))
    if len(ok) == 0:
        return math.inf
    first = int(np.argmax(ok))
    return float(scores.candidates[first]) if ok[first] else math.inf


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def _medoid(values: np.ndarray, weights: np.ndarray) -> float:
    """The value maximising the weighted sum of exp(-|value - other|) (the accuracy metric)."""
    agreement = np.exp(-np.abs(values[:, None] - values[None, :])) @ weights
    return float(values[int(np.argmax(agreement))])


@dataclass
class _State:
    history: HistoryIndex = field(default_factory=HistoryIndex)
    user_scores: dict = field(default_factory=dict)       # user -> [count, [score per expert]]
    global_scores: np.ndarray = field(default_factory=lambda: np.full(len(EXPERTS), 0.5))
    # Selector: row k predicts expert k's accuracy; starts at 0.5 for all (bias column).
    selector: np.ndarray = field(default_factory=lambda: np.hstack(
        (np.full((len(EXPERTS), 1), 0.5), np.zeros((len(EXPERTS), N_SELECTOR_FEATURES - 1)))))
    residuals: dict = field(default_factory=dict)          # regime -> deque of log residuals
    user_residuals: dict = field(default_factory=dict)     # user -> deque of log residuals
    residual_gaps: dict = field(default_factory=dict)      # regime -> deque of log(request) - estimate, aligned
    user_residual_gaps: dict = field(default_factory=dict)  # user -> the same, aligned with user_residuals
    residual_batches: dict = field(default_factory=dict)   # regime -> deque of batch ids, aligned
    user_residual_batches: dict = field(default_factory=dict)  # user -> the same, aligned with user_residuals
    # user -> {(request, procs): [first submit, last submit, batch id]}: the user's open batches
    batch_runs: dict = field(default_factory=dict)
    next_batch: int = 0
    ratios: deque = field(default_factory=deque)           # recent log(runtime / request)
    pending: OrderedDict = field(default_factory=OrderedDict)  # job_id -> (experts, features, selected, regime, bound, risk, blend)
    observed: int = 0
    blend_advantage: dict = field(default_factory=dict)    # user (None: cluster) -> EW accuracy gain of the blend
    risk_offset: float = 0.0      # adaptive conformal: effective risk = risk + offset
    trained_until: float = -math.inf  # end time of the last job train_model saw (replays skip older ones)


class WalltimeModel(OnlinePredictor):
    """Online walltime model (point + bound).

    :meth:`predict` only reads the model: any number of threads may predict
    without a lock, also while one thread calls :meth:`observe`. Everything a prediction reads
    is replaced by reference in :meth:`observe` (arrays are rebuilt, never updated in place),
    so a concurrent prediction sees each value either before or after an update. Calls to
    :meth:`observe` (and :meth:`remember`) must come from one thread at a time.
    :meth:`submit` is :meth:`predict` plus remembering the answer (one small lock) so that the
    job's outcome scores the very answer it was given.
    """

    name = "hpcpredict"
    has_bound = True

    def __init__(self, params: ModelParams | None = None):
        self.params = params or ModelParams()
        self.state = _State(history=HistoryIndex(self.params.history_depth))
        self.state.ratios = deque(maxlen=self.params.ratio_window)
        # Published by observe(), only read by predictions: sorted calibration scores per regime
        # and the typical runtime/request ratio (one small dict, replaced whole), and each user's
        # sorted scores (one entry set per ended job of that user).
        self._cluster_calibration: dict = {}
        self._user_calibration: dict[str, np.ndarray] = {}
        # the scores the bound is calibrated on, per regime and per user
        self._cluster_shortening: dict[str, ShorteningScores] = {}
        self._user_shortening: dict[str, ShorteningScores] = {}
        self._pending_lock = threading.Lock()

    # ------------------------------------------------------------------ experts
    def _experts(self, job: JobRecord) -> tuple[np.ndarray, np.ndarray] | None:
        """Candidate log estimates for ``job`` and the selector's features (None when its user
        has no ended job, or none with a comparable request)."""
        history = self.state.history.by_user.get(job.user)
        if not history:
            return None
        p = self.params
        log_request = math.log(job.requested_time_s) if job.requested_time_s > 0 else -1.0
        past = list(history)
        if log_request != -1.0 and p.new_request_factor > 0:
            near = math.log(p.new_request_factor)
            if all(abs(j.log_request - log_request) > near for j in past if j.log_request != -1.0):
                return None
        runtimes = np.fromiter((j.log_runtime for j in past), float, len(past))
        weights = np.empty(len(past))
        same_request = same_app = None
        weight = 1.0
        for i in range(len(past) - 1, -1, -1):
            job_i = past[i]
            w = weight
            if job_i.log_request == log_request and job_i.procs == job.procs:
                w *= p.similar_weight
                if same_request is None:
                    same_request = job_i.log_runtime
            if job.application and job_i.application == job.application:
                w *= p.same_app_weight
                if same_app is None:
                    same_app = job_i.log_runtime
            weights[i] = w
            weight *= p.decay
        medoid = _medoid(runtimes, weights)
        ratios = [j.log_runtime - j.log_request for j in past[-5:] if j.log_request != -1.0]
        with_request = [i for i, j in enumerate(past) if j.log_request != -1.0]
        all_ratios = np.fromiter((past[i].log_runtime - past[i].log_request for i in with_request), float,
                                 len(with_request))
        same_runs = [j.log_runtime for j in past if j.log_request == log_request and j.procs == job.procs][-3:]
        has_request = log_request != -1.0
        if has_request and p.ratio_evidence_factor > 0:
            asked = [j.log_request for j in past if j.log_request != -1.0]
            reach = math.log(p.ratio_evidence_factor)
            if asked and max(asked) - min(asked) <= reach and \
                    min(abs(a - log_request) for a in asked) > reach:
                ratios, with_request = [], []
        experts = np.array([
            medoid, runtimes[-1],
            medoid if same_request is None else same_request,
            medoid if same_app is None else same_app,
            _median([j.log_runtime for j in past[-5:]]),
            log_request if log_request != -1.0 else medoid,
            log_request + max(ratios) if ratios and has_request else medoid,
            log_request + ratios[-1] if ratios and has_request else medoid,
            log_request + _medoid(all_ratios, weights[with_request]) if len(with_request) and has_request
            else medoid,
            _median(same_runs) if same_runs else medoid,
        ])
        if has_request:
            np.minimum(experts, log_request, out=experts)
        return experts, self._selector_features(job.user, experts, log_request, same_request is not None)

    def _selector_features(self, user: str, experts: np.ndarray, log_request: float,
                           repeat: bool) -> np.ndarray:
        scored = self.state.user_scores.get(user)
        user_scores = scored[1] if scored else self.state.global_scores
        experience = min(scored[0], 20) / 20 if scored else 0.0
        ceiling = log_request if log_request != -1.0 else float(experts.max())
        values = experts.tolist()   # plain-Python mean/median: numpy's cost ~30 us on 10 values
        return np.concatenate((
            (1.0, experience), user_scores, self.state.global_scores, experts - sum(values) / len(values),
            np.abs(experts - _median(values)), user_scores - user_scores.max(),
            np.minimum(ceiling - experts, 3.0), (float(repeat),)))

    def _cold_estimate(self, job: JobRecord) -> float:
        if job.requested_time_s <= 0:
            return _LOG_DEFAULT
        log_request = math.log(job.requested_time_s)
        return log_request + min(self._typical_ratio_published(), 0.0)

    def _typical_ratio_published(self) -> float:
        typical = self._cluster_calibration.get("ratio")
        return self._typical_ratio() if typical is None else typical

    def _typical_ratio(self) -> float:
        """Medoid of recent log(runtime/request) over all users (0 = the request itself)."""
        ratios = np.fromiter(self.state.ratios, float)
        if len(ratios) < 20:
            return 0.0
        candidates = np.quantile(ratios, np.linspace(0.02, 0.98, 25))
        agreement = np.exp(-np.abs(candidates[:, None] - ratios[None, :])).sum(axis=1)
        return float(candidates[int(np.argmax(agreement))])

    def _choose(self, features: np.ndarray) -> int:
        """The expert with the highest predicted accuracy."""
        return int(np.argmax(self.state.selector @ features))

    def _blend(self, experts: np.ndarray, features: np.ndarray, predicted: np.ndarray | None = None) -> float:
        """The accuracy-optimal point over the experts weighted by predicted accuracy ** power."""
        if predicted is None:
            predicted = self.state.selector @ features
        return _medoid(experts, np.clip(predicted, 1e-3, 1.0) ** self.params.blend_power)

    def _use_blend(self, user: str) -> bool:
        advantage = self.state.blend_advantage
        return advantage.get(user, advantage.get(None, 0.0)) > 0.0

    # ------------------------------------------------------------------ calibration
    def _quantile(self, user: str, regime: str, level: float) -> float:
        user_scores = self.state.user_residuals.get(user)
        if regime == WARM and user_scores is not None and len(user_scores) >= self.params.user_min:
            ordered = self._user_calibration.get(user)
            if ordered is None:
                ordered = np.sort(np.fromiter(tuple(user_scores), float))
        else:
            ordered = self._cluster_calibration.get(regime)
            if ordered is None:
                ordered = np.sort(np.fromiter(tuple(self.state.residuals.get(regime, ())), float))
        return conformal_quantile(ordered, level)

    def _bound_shift(self, user: str, regime: str, level: float) -> float:
        """The log shift of the bound above the estimate: :func:`shortening_shift` on the
        user's own scores once there are enough of them (and enough of those jobs would be
        shortened), else on the regime's."""
        if regime == WARM:
            own = self._user_shortening.get(user)
            if own is None:
                scores = self.state.user_residuals.get(user)
                if scores is not None and len(scores) >= self.params.user_min:
                    own = ShorteningScores.of(scores, self.state.user_residual_gaps.get(user, ()),
                                              self.state.user_residual_batches.get(user))
            if own is not None:
                shift = _shift_at(own, level, self.params.min_shortened_outliers)
                if math.isfinite(shift):
                    return shift
        pairs = self._cluster_shortening.get(regime)
        if pairs is None:
            pairs = ShorteningScores.of(self.state.residuals.get(regime, ()), self.state.residual_gaps.get(regime, ()),
                                        self.state.residual_batches.get(regime))
        return _shift_at(pairs, level, self.params.min_shortened_outliers)

    def _publish_calibration(self, user: str | None, refresh_all: bool) -> None:
        """Recompute the sorted scores predictions read, and publish them.

        A user's scores are refreshed when that user's job ends; the cluster-wide ones (per
        regime, and the typical ratio) move slowly and are refreshed every 100 ended jobs, and
        as soon as they first exist."""
        if user is not None:
            scores = self.state.user_residuals.get(user)
            if scores is not None and len(scores) >= self.params.user_min:
                self._user_calibration[user] = np.sort(np.fromiter(scores, float))
                self._user_shortening[user] = ShorteningScores.of(scores, self.state.user_residual_gaps.get(user, ()),
                                                                  self.state.user_residual_batches.get(user))
        cluster = self._cluster_calibration
        missing = [regime for regime in self.state.residuals if regime not in cluster]
        if refresh_all or missing or "ratio" not in cluster:
            published = dict(cluster)
            for regime, scores in self.state.residuals.items():
                if refresh_all or regime in missing:
                    published[regime] = np.sort(np.fromiter(scores, float))
                    self._cluster_shortening = dict(self._cluster_shortening, **{
                        regime: ShorteningScores.of(scores, self.state.residual_gaps.get(regime, ()),
                                                    self.state.residual_batches.get(regime))})
            if refresh_all or "ratio" not in published:
                published["ratio"] = self._typical_ratio()
            self._cluster_calibration = published

    # ------------------------------------------------------------------ interface
    def predict(self, job: JobRecord, risk: float = 0.03, explain: bool = True,
                soft_risk: float | None = None) -> RuntimeEstimate:
        """The estimate at ``risk``, read only; ``explain=False`` skips the (costlier)
        explanation text. ``soft_risk`` also fills ``soft_s``: the bound at that risk from the
        same pass (equal to ``predict(job, soft_risk).bound_s``)."""
        return self._assess(job, risk, explain, soft_risk)[0]

    def submit(self, job: JobRecord, risk: float = 0.03, explain: bool = True,
               soft_risk: float | None = None) -> RuntimeEstimate:
        """:meth:`predict`, remembering it (by ``job.job_id``) so the job's outcome scores it
        (the answer at ``risk``; ``soft_s`` is never scored)."""
        prediction, submitted = self._assess(job, risk, explain, soft_risk)
        if job.job_id:
            with self._pending_lock:
                pending = self.state.pending
                pending[job.job_id] = submitted
                if len(pending) > self.params.pending_limit:
                    pending.popitem(last=False)
        return prediction

    def _assess(self, job: JobRecord, risk: float, explain: bool,
                soft_risk: float | None = None) -> tuple[RuntimeEstimate, tuple]:
        """The answer for ``job`` and what its outcome will be scored against; reads only."""
        for value in (risk, soft_risk):
            if value is not None and not 0.0 < value < 1.0:
                raise ValueError(f"risk must be in (0, 1), got {value}")
        candidates = self._experts(job)
        experts = features = None
        if candidates is None:
            regime, estimate, chosen = COLD, self._cold_estimate(job), -1
        else:
            experts, features = candidates
            predicted = self.state.selector @ features     # each expert's expected accuracy
            regime, chosen = WARM, int(np.argmax(predicted))
            estimate = float(experts[chosen])
        # The bound is calibrated on the selected expert's residuals; the point answer may be
        # the blend (both are scored when the job ends).
        point = estimate
        if experts is not None and features is not None and self.params.blend_power > 0:   # both or neither
            blend = self._blend(experts, features, predicted)
            if self._use_blend(job.user):
                point = blend
        else:
            blend = None
        log_request = math.log(job.requested_time_s) if job.requested_time_s > 0 else math.inf
        bound, shift = self._log_bound(job.user, regime, estimate, log_request, risk)
        answered_bound = max(bound, point)   # a limit below the point estimate would be incoherent
        # Another quantile costs one more shift lookup, not a second pass over the experts.
        soft = max(math.exp(max(self._log_bound(job.user, regime, estimate, log_request, soft_risk)[0], point)), 1.0) \
            if soft_risk is not None else 0.0
        low = estimate + self._quantile(job.user, regime, _INTERVAL[0])
        high = min(estimate + self._quantile(job.user, regime, _INTERVAL[1]), log_request)
        coverage = _INTERVAL[1] - _INTERVAL[0]
        if not (math.isfinite(low) and math.isfinite(high)):
            low = high = estimate
            coverage = 0.0
        return RuntimeEstimate(
            runtime_s=max(math.exp(point), 1.0), bound_s=max(math.exp(answered_bound), 1.0),
            low_s=max(math.exp(min(low, point)), 1.0), high_s=max(math.exp(max(high, point)), 1.0),
            coverage=coverage, explanation=self._explain(
                job, chosen if experts is None or point == estimate else int(np.argmin(np.abs(experts - point))),
                risk, shift, point != estimate, point) if explain else (),
            fallback=experts is None, model_name=self.name, soft_s=soft,
            bound_calibrated=experts is not None), (experts, features, estimate, regime, bound, risk, blend)

    def _log_bound(self, user: str, regime: str, estimate: float, log_request: float,
                   risk: float) -> tuple[float, float]:
        """(the log bound at ``risk``, its shift above the estimate); the adaptive offset applies."""
        # Without history of its own a job keeps its request as limit: correlated batches (a
        # job array after two test runs) break the exchangeability the calibration relies on.
        effective = min(max(risk + self.state.risk_offset, 1e-3), 0.5)
        shift = self._bound_shift(user, regime, 1.0 - effective) if regime == WARM or log_request == math.inf \
            else math.inf
        bound = min(estimate + shift, log_request)
        if not math.isfinite(bound):       # no calibration yet and no request
            bound = estimate + math.log(4.0)
        return bound, shift

    def observe(self, record: JobRecord) -> None:
        if record.runtime_s < 0 or self._already_trained(record):
            return
        state, p = self.state, self.params
        runtime = occupancy_log(record)
        if record.job_id:
            with self._pending_lock:
                pending = state.pending.pop(record.job_id, None)
        else:
            pending = None
        if pending is None:   # never predicted (e.g. history loaded from the store)
            candidates = self._experts(record)
            if candidates is None:
                pending = (None, None, self._cold_estimate(record), COLD, None, None, None)
            else:
                experts, features = candidates
                pending = (experts, features, float(experts[self._choose(features)]), WARM, None, None, None)
        experts, features, estimate, regime, bound, risk, blend = pending
        if blend is not None:   # did the blend beat the selected expert on this job?
            gain = math.exp(-abs(blend - runtime)) - math.exp(-abs(estimate - runtime))
            advantage = state.blend_advantage
            for key, rate in ((record.user, p.blend_user_rate), (None, p.blend_global_rate)):
                before = advantage.get(key, 0.0)
                advantage[key] = before + rate * (gain - before)
        if experts is not None:
            accuracy = np.exp(-np.abs(experts - runtime))
            # NLMS on every expert's accuracy, with the features this job had at submission.
            # New arrays, swapped in whole: a concurrent prediction never reads half an update.
            error = accuracy - state.selector @ features
            state.selector = state.selector + (p.selector_rate / (1.0 + features @ features)) * np.outer(error, features)
            count, scores = state.user_scores.get(record.user) or (0, np.full(len(EXPERTS), 0.5))
            state.user_scores[record.user] = [count + 1, scores + p.expert_rate * (accuracy - scores)]
            state.global_scores = state.global_scores + p.global_rate * (accuracy - state.global_scores)
        log_request = math.log(record.requested_time_s) if record.requested_time_s > 0 else math.inf
        if not record.censored:
            # Adapt on the jobs the bound shortened (the only ones it can kill), not all jobs.
            if bound is not None and regime == WARM and bound < log_request:
                killed = 1.0 if runtime > bound else 0.0
                state.risk_offset += p.adapt_rate * (risk - killed)

            residual = runtime - estimate
            gap = min(log_request - estimate, NO_REQUEST_GAP)
            batch = self._batch_of(record)
            for scores, gaps, batches, key, size in (
                    (state.residuals, state.residual_gaps, state.residual_batches, regime, p.calibration_window),
                    (state.user_residuals, state.user_residual_gaps, state.user_residual_batches, record.user,
                     p.user_window)):
                if scores is state.user_residuals and regime != WARM:
                    continue
                window = scores.get(key)
                if window is None:
                    window = scores[key] = deque(maxlen=size)
                gap_window = gaps.get(key)
                if gap_window is None or len(gap_window) != len(window):   # absent from older states
                    gap_window = gaps[key] = deque([NO_REQUEST_GAP] * len(window), maxlen=size)
                batch_window = batches.get(key)
                if batch_window is None or len(batch_window) != len(window):   # absent from older states
                    batch_window = batches[key] = deque(self._new_batches(len(window)), maxlen=size)
                window.append(residual)
                gap_window.append(gap)
                batch_window.append(batch)
        if record.requested_time_s > 0:
            state.ratios.append(runtime - math.log(record.requested_time_s))
        state.history.add(record)
        state.observed += 1
        self._publish_calibration(record.user, refresh_all=state.observed % 100 == 0)

    def _batch_of(self, record: JobRecord) -> int:
        """The batch id of an ended job: the batch of its user's jobs with the same request and
        size submitted within ``batch_window_s`` of it (ends come in any order, so a batch is the
        submission span [first - window, last + window]), else a new one. Keeps the last few
        (request, size) runs per user."""
        window = self.params.batch_window_s
        if window <= 0 or record.submit_time < 0:
            return self._new_batches(1)[0]
        runs = self.state.batch_runs.setdefault(record.user, {})
        key = (float(record.requested_time_s), int(record.procs))
        run = runs.get(key)
        submit = float(record.submit_time)
        if run is not None and run[0] - window <= submit <= run[1] + window:
            run[0], run[1] = min(run[0], submit), max(run[1], submit)
            return run[2]
        batch = self._new_batches(1)[0]
        runs.pop(key, None)
        runs[key] = [submit, submit, batch]
        if len(runs) > _BATCH_RUNS_PER_USER:     # the oldest run (insertion order) is closed
            del runs[next(iter(runs))]
        return batch

    def _new_batches(self, count: int) -> list[int]:
        """``count`` fresh batch ids (a job of its own each)."""
        first = self.state.next_batch
        self.state.next_batch = first + count
        return list(range(first, first + count))

    def _already_trained(self, record: JobRecord) -> bool:
        """True for a job that ended before training stopped: the daemon replays its whole store
        into a freshly loaded model, and those jobs are in the model already."""
        ended = record.end_time if record.end_time >= 0 else record.submit_time + record.runtime_s
        return ended <= self.state.trained_until

    def remember(self, record: JobRecord) -> None:
        """Add an ended job to the history without scoring any answer (bulk warm-up of old
        history: only the per-user recent jobs and the ratio window keep anything of it)."""
        if record.runtime_s < 0:
            return
        if record.requested_time_s > 0:
            self.state.ratios.append(occupancy_log(record) - math.log(record.requested_time_s))
        self.state.history.add(record)
        self.state.observed += 1

    # ------------------------------------------------------------------ explanation
    def _explain(self, job: JobRecord, chosen: int, risk: float, shift: float,
                 blended: bool = False, estimate: float = math.nan) -> tuple[str, ...]:
        past: list[PastJob] = self.state.history.recent(job.user)
        if chosen < 0:
            if job.requested_time_s > 0:
                ratio = math.exp(min(self._typical_ratio_published(), 0.0))
                return (f"no history for you: {ratio:.0%} of your request, the share jobs on this cluster "
                        "typically use of theirs",)
            return ("no history and no request: default 1 h",)
        expert = EXPERTS[chosen]
        if expert in _SCALES_REQUEST and job.requested_time_s <= 0:
            expert = "medoid"     # without a request these experts are the medoid
        share = math.exp(estimate) / job.requested_time_s if job.requested_time_s > 0 and math.isfinite(estimate) \
            else 1.0
        same = [j for j in past if job.application and j.application == job.application][-5:]
        runs = same or past[-5:]
        what = f" of {job.application}" if same else ""
        low, high = min(j.log_runtime for j in runs), max(j.log_runtime for j in runs)
        if job.requested_time_s > 0 and share >= 0.999 and expert != "request":   # capped: the job cannot run past its limit
            basis = "your request (the job stops at its limit)"
        else:
            basis = _EXPERT_TEXT[expert].format(share=f"{share:.0%}")
        lines = [f"your last {len(runs)} runs{what}: {human_range(math.exp(low), math.exp(high))}",
                 f"estimate: {basis}" + (" (where most estimates from your history agree)" if blended else "")]
        if math.isfinite(shift):
            lines.append(f"limit: the estimate + {math.exp(shift) - 1:.0%}; {100 * (1 - risk):.0f} % of comparable "
                         "jobs given such a limit ended within it")
        return tuple(lines)

    # ------------------------------------------------------------------ persistence helpers
    def to_state(self) -> dict:
        """Plain-data snapshot (JSON-able) of everything learned."""
        s = self.state
        return {
            "params": asdict(self.params),
            "history": {user: [[j.log_runtime, j.log_request, j.procs, j.application, j.censored, j.end_time]
                               for j in jobs] for user, jobs in s.history.by_user.items()},
            "user_totals": s.history.user_totals,
            "user_scores": {u: [c, v.tolist()] for u, (c, v) in s.user_scores.items()},
            "global_scores": s.global_scores.tolist(),
            "selector": s.selector.tolist(),
            "residuals": {k: list(v) for k, v in s.residuals.items()},
            "user_residuals": {u: list(v) for u, v in s.user_residuals.items()},
            "residual_gaps": {k: list(v) for k, v in s.residual_gaps.items()},
            "user_residual_gaps": {u: list(v) for u, v in s.user_residual_gaps.items()},
            "residual_batches": {k: list(v) for k, v in s.residual_batches.items()},
            "user_residual_batches": {u: list(v) for u, v in s.user_residual_batches.items()},
            "batch_runs": {u: [[request, procs, *run] for (request, procs), run in runs.items()]
                           for u, runs in s.batch_runs.items()},
            "next_batch": s.next_batch,
            "ratios": list(s.ratios),
            "observed": s.observed,
            "risk_offset": s.risk_offset,
            "blend_advantage": {"users": {u: v for u, v in s.blend_advantage.items() if u is not None},
                                "cluster": s.blend_advantage.get(None, 0.0)},
            "trained_until": s.trained_until if math.isfinite(s.trained_until) else None,
        }

    @classmethod
    def from_state(cls, data: dict) -> "WalltimeModel":
        """Inverse of :meth:`to_state` (raises KeyError/TypeError/ValueError on bad data)."""
        unknown = set(data["params"]) - {f.name for f in fields(ModelParams)}
        if unknown:
            # A newer release's parameter it saved without a new format version: refuse by name,
            # not with ModelParams' TypeError (what an older release said to 'ratio_evidence_factor').
            raise ValueError(f"parameter(s) this hpcpredict does not know: {', '.join(sorted(unknown))} "
                             f"(written by a newer hpcpredict?)")
        params = ModelParams(**data["params"])
        model = cls(params)
        s = model.state
        for user, jobs in data["history"].items():
            bucket = s.history.by_user[str(user)] = deque(maxlen=params.history_depth)
            for lr, lq, procs, app, censored, end in jobs:
                bucket.append(PastJob(float(lr), float(lq), int(procs), str(app), bool(censored), float(end)))
        s.history.user_totals = {str(u): [float(c), float(t)] for u, (c, t) in data["user_totals"].items()}
        s.user_scores = {str(u): [int(c), np.asarray(v, float)] for u, (c, v) in data["user_scores"].items()}
        s.global_scores = np.asarray(data["global_scores"], float)
        if s.global_scores.shape != (len(EXPERTS),):
            raise ValueError("global_scores has the wrong length")
        s.selector = np.asarray(data["selector"], float)
        if s.selector.shape != (len(EXPERTS), N_SELECTOR_FEATURES):
            raise ValueError("selector has the wrong shape")
        s.residuals = {str(k): deque(map(float, v), maxlen=params.calibration_window)
                       for k, v in data["residuals"].items()}
        s.user_residuals = {str(u): deque(map(float, v), maxlen=params.user_window)
                            for u, v in data["user_residuals"].items()}
        # Gaps are absent from format-3 states: their residuals count as shortened jobs (the
        # calibration over all jobs those models had), until the window turns over.
        for scores, gaps, name, size in ((s.residuals, s.residual_gaps, "residual_gaps", params.calibration_window),
                                         (s.user_residuals, s.user_residual_gaps, "user_residual_gaps",
                                          params.user_window)):
            stored = data.get(name, {})
            for key, window in scores.items():
                values = [float(v) for v in stored.get(key, ())]
                if len(values) != len(window):
                    values = [NO_REQUEST_GAP] * len(window)
                gaps[key] = deque(values, maxlen=size)
        # Batch ids are absent from format-4 states: each stored residual is then its own batch.
        s.next_batch = int(data.get("next_batch", 0))
        for scores, batches, name in ((s.residuals, s.residual_batches, "residual_batches"),
                                      (s.user_residuals, s.user_residual_batches, "user_residual_batches")):
            stored = data.get(name, {})
            for key, window in scores.items():
                ids = [int(v) for v in stored.get(key, ())]
                if len(ids) != len(window):
                    ids = model._new_batches(len(window))
                batches[key] = deque(ids, maxlen=window.maxlen)
        s.batch_runs = {str(u): {(float(request), int(procs)): [float(first), float(last), int(batch)]
                                 for request, procs, first, last, batch in runs}
                        for u, runs in data.get("batch_runs", {}).items()}
        s.ratios = deque(map(float, data["ratios"]), maxlen=params.ratio_window)
        s.observed = int(data["observed"])
        s.risk_offset = float(data["risk_offset"])
        blend = data.get("blend_advantage")   # absent from format-2 states: start neutral
        if blend is not None:
            s.blend_advantage = {str(u): float(v) for u, v in blend["users"].items()}
            s.blend_advantage[None] = float(blend["cluster"])
        s.trained_until = -math.inf if data["trained_until"] is None else float(data["trained_until"])
        model._publish_calibration(None, refresh_all=True)
        for user in s.user_residuals:
            model._publish_calibration(user, refresh_all=False)
        return model

"""The one runtime-estimate type every source of a runtime answer returns.

The application's runtime model (inputs), the walltime model (history), the recent-history
model and the request/default answer all return a :class:`RuntimeEstimate` (or None when they
have nothing to say), so the engine asks them in turn with one loop and never unpacks a
source-specific shape.

>>> estimate = RuntimeEstimate(runtime_s=600.0, low_s=500.0, high_s=700.0, coverage=0.8, bound_s=750.0,
...                            explanation=("your last 3 runs: 8–12 min",), model_name="recent-history")
>>> estimate.fallback, estimate.model_version
(False, '1')
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeEstimate:
    """How long one job will run (seconds), and which model says so."""

    runtime_s: float               # point estimate (a soft time_min plans with soft_s when it is given)
    low_s: float                   # [low_s, high_s]: central interval of nominal `coverage`
    high_s: float
    coverage: float                # 0 when the source gives no interval
    bound_s: float                 # upper bound at the requested risk (0: the source gives none)
    explanation: tuple[str, ...]   # lines for the user, most important first
    model_name: str                # the model (or rule) that answered
    model_version: str = "1"
    fallback: bool = False         # True when no model knew this job (request or site default)
    # The runtime the job outlives with probability [policy] soft_risk: what a soft --time-min
    # plans with. 0: not asked (only in soft mode, at submission) or the source has none.
    soft_s: float = 0.0
    # True when bound_s is an upper bound calibrated at the requested risk (the walltime model's
    # adaptive bound, the inputs model's conformal one). A rule's bound (1.1 x a quantile of the
    # user's last runs) is not: replayed on KTH-SP2 it killed 79 of 308 jobs it shortened at
    # 3 % risk, so a kill limit (bound mode) is never set from it.
    bound_calibrated: bool = False

    @property
    def soft_value_s(self) -> float:
        """What a soft ``--time-min`` plans with: ``soft_s``, else (a source without a quantile)
        the point estimate. The daemon and the scheduling replay both read it here."""
        return self.soft_s or self.runtime_s

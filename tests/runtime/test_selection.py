"""The learner choice on constructed cross-validation errors, and the blend's cheap cross-validation."""
import numpy as np
import pytest

from hpcpredict.daemon.lab.runtime.selection import (blend_of_candidates, clearly_better, out_of_fold_errors, pick,
                                                 select_learner, selection_report)

from .synthetic import power_law_table

rng = np.random.default_rng(1)
BASE = rng.uniform(0.08, 0.12, 60)           # per-configuration errors of the simplest learner
JITTER = np.resize([0.004, -0.004], 60)      # small paired differences: a steady gap is significant


@pytest.mark.parametrize("blend_factor, expected", [
    (0.97, "blend"),           # the blend is best
    (1.02, "blend"),           # a little worse than the single learners' choice: not clearly, the hedge is served
    (1.04, "blend"),           # 4 %: within the 5 % margin
    (1.10, "log-linear"),      # 10 % worse, steadily: the single learner beats it clearly
])
def test_blend_is_served_unless_the_single_learners_choice_beats_it_clearly(blend_factor, expected):
    errors = {"log-linear": BASE, "boosted-trees": BASE * 0.99 + JITTER, "blend": BASE * blend_factor + JITTER}
    assert pick(errors) == expected


def test_a_richer_single_learner_that_wins_clearly_must_also_beat_the_blend_clearly():
    boosted = BASE * 0.8 + JITTER
    assert pick({"log-linear": BASE, "boosted-trees": boosted}) == "boosted-trees"
    assert pick({"log-linear": BASE, "boosted-trees": boosted, "blend": BASE * 0.85}) == "boosted-trees"
    assert pick({"log-linear": BASE, "boosted-trees": boosted, "blend": BASE * 0.82 + JITTER}) == "blend"


def test_an_erratic_gap_is_not_clear():
    """10 % lower on average but with paired differences far larger than that: luck, not evidence."""
    steady = np.full(60, 0.3)
    erratic = steady * 1.1 + np.resize([0.3, -0.3], 60)
    assert not clearly_better(steady, erratic) and clearly_better(steady, steady * 1.1)
    assert pick({"log-linear": steady, "blend": erratic}) == "blend"


@pytest.mark.parametrize("errors, expected", [
    ({"log-linear": None, "boosted-trees": None, "blend": None}, "log-linear"),   # nothing cross-validated
    ({"log-linear": BASE, "blend": None}, "log-linear"),
    ({"blend": BASE}, "blend"),
    ({"log-linear": BASE, "extra-trees": BASE * 0.7}, "extra-trees"),               # no blend: the one-SE rule alone
])
def test_choice_when_candidates_are_missing(errors, expected):
    assert pick(errors) == expected


def test_report_says_why_the_blend_or_a_single_learner_is_served():
    scores = {"log-linear": 0.10, "boosted-trees": 0.098, "blend": 0.097}
    report = selection_report("blend", scores, noise=0.08)
    assert "blend" in report["reason"] and "boosted-trees 9.8%" in report["reason"]
    assert report["simple_model_served"] is False and report["at_noise_floor"] is True
    report = selection_report("log-linear", {"log-linear": 0.10, "boosted-trees": 0.12, "blend": 0.115}, noise=None)
    assert report["simple_model_served"] is True and "beats the blend clearly (10.0% vs 11.5%)" in report["reason"]


SMALL_BOOSTED = {"max_iter": 30}


@pytest.mark.parametrize("blend, candidates, expected", [
    ({}, {"gaussian-process": {}, "boosted-trees": {}, "ann": {}}, ("gaussian-process", "boosted-trees", "ann")),
    ({"members": ("log-linear", "boosted-trees"), "member_params": {"boosted-trees": SMALL_BOOSTED}},
     {"log-linear": {"random_state": 4}, "boosted-trees": dict(SMALL_BOOSTED, random_state=4)},
     ("log-linear", "boosted-trees")),
    ({}, {"log-linear": {}, "boosted-trees": {}}, None),                              # the ANN is not a candidate
    ({}, {"log-linear": {}, "boosted-trees": SMALL_BOOSTED, "ann": {}}, None),         # fitted otherwise alone
    ({"members": ("log-linear", "boosted-trees"), "member_params": {"ann": {}}},
     {"log-linear": {}, "boosted-trees": {}}, None),                                  # parameters of a non-member
])
def test_blend_reuses_its_members_only_when_they_are_candidates_fitted_the_same(blend, candidates, expected):
    assert blend_of_candidates(blend, dict(candidates, blend=blend)) == expected


def test_choice_cross_validates_the_blend_from_its_members_as_if_fitted_itself():
    """The blend's cross-validated errors in the choice are those of the blend fitted fold by fold,
    on each of the repeated fold assignments, averaged."""
    table = power_law_table(n_configs=40, reps=2, seed=3)
    rows = np.arange(len(table.y))
    inputs = ["n", "m", "p", "noise_a"]
    blend = {"members": ("log-linear", "boosted-trees"), "member_params": {"boosted-trees": SMALL_BOOSTED}}
    candidates = {"log-linear": {}, "boosted-trees": SMALL_BOOSTED, "blend": blend}
    _, once = select_learner(table, rows, inputs=inputs, candidates=candidates, seed=2, repeats=1)
    _, twice = select_learner(table, rows, inputs=inputs, candidates=candidates, seed=2, repeats=2)
    itself = [out_of_fold_errors(table, rows, "blend", blend, inputs=inputs, seed=2, fold_seed=fold_seed)
              for fold_seed in (2, 3)]
    assert once["blend"] == pytest.approx(float(itself[0].mean()), rel=1e-12)
    assert twice["blend"] == pytest.approx(float(np.mean(itself)), rel=1e-12)
    assert itself[0].mean() != pytest.approx(itself[1].mean(), rel=1e-6)   # the two assignments differ
    alone = [out_of_fold_errors(table, rows, "log-linear", {}, inputs=inputs, seed=2, fold_seed=fold_seed)
             for fold_seed in (2, 3)]
    assert twice["log-linear"] == pytest.approx(float(np.mean(alone)), rel=1e-12)

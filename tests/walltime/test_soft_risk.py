"""The soft --time-min's value: the walltime model's bound at [policy] soft_risk, read in the
same pass as the answer at the site's risk, never scored and never changing the model."""
import json

import pytest

from hpcpredict.daemon.history.model import WalltimeModel
from hpcpredict.daemon.lab.history.training import train_model
from tests.walltime.test_predict_is_pure import digest, probes
from tests.walltime.test_predictors import synthetic_users


@pytest.fixture(scope="module")
def trained():
    return train_model(synthetic_users(seed=21, n_jobs=1500))


def test_soft_value_is_the_answer_at_soft_risk_from_the_same_pass(trained):
    above = 0
    for job in probes():
        answer = trained.predict(job, 0.03, explain=False, soft_risk=0.3)
        alone = trained.predict(job, 0.03, explain=False)
        # the answer at the site's risk is unchanged by asking for another quantile
        assert (answer.runtime_s, answer.bound_s, answer.low_s, answer.high_s) == \
            (alone.runtime_s, alone.bound_s, alone.low_s, alone.high_s) and alone.soft_s == 0.0
        assert answer.soft_s == trained.predict(job, 0.3, explain=False).bound_s
        assert answer.runtime_s <= answer.soft_s <= answer.bound_s
        above += answer.soft_s > answer.runtime_s
    assert above > 0       # a history with spread: the soft value sits above the point estimate


def test_asking_for_the_soft_value_changes_nothing_but_the_remembered_answer(trained):
    before = digest(trained)
    for job in probes():
        trained.predict(job, 0.03, explain=False, soft_risk=0.3)
    assert digest(trained) == before
    model = WalltimeModel.from_state(trained.to_state())
    job = probes()[0]
    model.submit(job, 0.03, soft_risk=0.3)
    plain = WalltimeModel.from_state(trained.to_state())
    plain.submit(job, 0.03)
    assert model.state.pending[job.job_id][4:6] == plain.state.pending[job.job_id][4:6]   # scored at 0.03
    assert json.dumps(model.to_state(), sort_keys=True) == json.dumps(plain.to_state(), sort_keys=True)


def test_a_soft_risk_outside_zero_one_is_refused(trained):
    with pytest.raises(ValueError, match="risk"):
        trained.predict(probes()[0], 0.03, soft_risk=1.0)

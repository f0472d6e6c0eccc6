"""The block-effect estimators of the noise floor, against known ground truth and the repetition noise floor."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcpredict.daemon.lab.runtime.accuracy import repetition_disagreement
from hpcpredict.daemon.lab.runtime.noise_floor import between_block_sigma, repetition_mape_with_block_effect

DATA = Path(__file__).parent.parent / "data" / "runtime"


@pytest.mark.parametrize("sigma_block", [0.0, 0.05, 0.1])
def test_between_block_sigma_recovers_a_known_block_effect(sigma_block):
    rng = np.random.default_rng(3)
    blocks = np.repeat(np.arange(40), 10)                      # 40 blocks of 10 configurations
    effect = rng.normal(0, sigma_block, 40)[blocks] if sigma_block else 0.0
    frame = pd.DataFrame({"block": blocks, "r": effect + rng.normal(0, 0.08, blocks.size)})
    result = between_block_sigma(frame, "r")
    assert result["sigma"] == pytest.approx(sigma_block, abs=0.02)
    assert result["sigma_config_residual"] == pytest.approx(0.08, rel=0.1)
    assert (result["p"] < 0.001) == (sigma_block >= 0.05)


def test_floor_with_block_effect_is_the_repetition_noise_when_there_is_none_and_grows_with_it():
    runs = pd.read_csv(DATA / "gromacs_water.csv").rename(columns={"runtime_s": "_runtime"})
    plain = repetition_disagreement(runs["config"].to_numpy(), runs["_runtime"].to_numpy())
    assert repetition_mape_with_block_effect(runs, 0.0) == pytest.approx(plain, rel=1e-6)
    floors = [repetition_mape_with_block_effect(runs, s) for s in (0.02, 0.05, 0.1)]
    assert plain < floors[0] < floors[1] < floors[2]
    # A lone block effect of σ: E|e^b − 1| ≈ σ·√(2/π) when within-block errors are small.
    quiet = pd.DataFrame({"config": np.repeat(np.arange(50), 3), "_runtime": 1.0})
    assert repetition_mape_with_block_effect(quiet, 0.05) == pytest.approx(0.05 * np.sqrt(2 / np.pi), rel=0.03)

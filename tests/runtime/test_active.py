import numpy as np

from hpcpredict.daemon.lab.runtime.active import pick_diverse, suggest_runs


def test_min_distance_rule_and_relaxation():
    cov = np.array([0.9, 0.8, 0.7, 0.1])
    X = np.array([[0.0], [0.1], [0.2], [5.0]])
    assert pick_diverse(cov, X, done=np.empty((0, 1)), k=2, min_distance=1.0) == [0, 3]
    # only 2 points are 1.0 apart: the distance is relaxed to find a third
    assert pick_diverse(cov, X, done=np.empty((0, 1)), k=3, min_distance=1.0) == [0, 2, 3]
    # a done run blocks its neighbourhood
    assert pick_diverse(cov, X, done=np.array([[0.05]]), k=1, min_distance=1.0) == [3]


def test_suggestions_go_where_the_ensemble_disagrees():
    rng = np.random.default_rng(0)
    X_done = rng.uniform(1, 5, size=(30, 1))  # runs only in the lower half
    y_done = X_done[:, 0] ** 2
    candidates = np.linspace(1, 20, 40)[:, None]
    picked, cov, predicted = suggest_runs(candidates, X_done, y_done, k=3, n_members=5, random_state=0)
    assert len(set(picked)) == 3
    assert np.mean(candidates[picked, 0]) > 8  # far from the data, where members disagree
    assert cov[-1] > cov[0] and predicted.shape == (40,)


def test_density_weighting_keeps_picks_off_the_corners():
    from hpcpredict.daemon.lab.runtime.active import candidate_density

    rng = np.random.default_rng(1)
    Z = np.vstack([rng.normal(0, 1, size=(300, 3)), [[8.0, 8.0, 8.0]]])  # one far outlier
    density = candidate_density(Z)
    assert density[-1] < 0.01 * np.median(density[:-1])
    # Chunked and subsampled: same answer shape, bounded reference set.
    big = candidate_density(np.tile(Z, (10, 1)), max_reference=500, chunk=257)
    assert big.shape == (3010,) and np.all(big > 0)

    X_done = rng.uniform(1, 5, size=(30, 1))
    candidates = np.concatenate([np.linspace(5, 12, 60), [40.0]])[:, None]  # 40: a lone extreme
    plain, _, _ = suggest_runs(candidates, X_done, X_done[:, 0] ** 2, k=1, n_members=4, random_state=0)
    dense, _, _ = suggest_runs(candidates, X_done, X_done[:, 0] ** 2, k=1, n_members=4, random_state=0,
                               density=True)
    assert plain == [60] and dense != [60]

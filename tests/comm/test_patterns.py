"""Communication patterns: grids, neighbour sets, message sizes, the benchmark's peers."""
import numpy as np
import pytest

from hpcpredict.daemon.comm.patterns import benchmark_peers, build_pattern, dims_create
from hpcpredict.daemon.errors import InvalidRequest


@pytest.mark.parametrize("n, d, expected", [
    (12, 3, (3, 2, 2)), (16, 4, (2, 2, 2, 2)), (7, 3, (7, 1, 1)), (64, 3, (4, 4, 4)),
    (30, 2, (6, 5)), (1, 3, (1, 1, 1)), (216, 3, (6, 6, 6)),
])
def test_dims_create_matches_mpi(n, d, expected):
    assert dims_create(n, d) == expected


def test_halo3d_open_boundaries():
    m = build_pattern("halo3d", 27, 1000)                      # 3x3x3
    sent = np.bincount(m.src, minlength=27)
    assert sent[13] == 6 and sent[0] == 3 and sent.sum() == 2 * 3 * (2 * 9)
    assert set(m.nbytes.tolist()) == {1000}
    # centre rank 13 talks to its six face neighbours
    assert sorted(m.dst[m.src == 13].tolist()) == [4, 10, 12, 14, 16, 22]


def test_halo4d_is_periodic_with_eight_faces():
    m = build_pattern("halo4d", 81, 64)                        # 3x3x3x3 torus
    assert np.all(np.bincount(m.src) == 8)
    assert np.all(np.bincount(m.dst) == 8)


def test_lulesh1_sizes_faces_edges_corners():
    m = build_pattern("lulesh1", 27, 24 * 16)                  # face 384 B: 16 = 4x4 points
    centre = m.src == 13
    assert centre.sum() == 26
    sizes = np.sort(m.nbytes[centre])
    # 8 corners of 24 B (one point x 3 doubles), 12 edges of 96 B (4 points), 6 faces
    assert sizes.tolist() == [24] * 8 + [96] * 12 + [384] * 6


def test_lulesh2_and_lulesh3():
    assert build_pattern("lulesh2", 27, 100).src.size == build_pattern("halo3d", 27, 100).src.size
    m = build_pattern("lulesh3", 27, 48 * 9)
    centre = m.src == 13
    assert centre.sum() == 13                                  # wavefront: half of 26
    assert (m.dst == 13).sum() == 13
    assert sorted(np.unique(m.nbytes[centre]).tolist()) == [48, 144, 432]


def test_benchmark_peers_are_balanced_and_never_self():
    peers = benchmark_peers(10, 3, seed=7)
    assert peers.shape == (3, 10)
    for row in peers:
        assert sorted(row.tolist()) == list(range(10))         # each rank receives one per round
        assert np.all(row != np.arange(10))
    assert np.array_equal(peers, benchmark_peers(10, 3, seed=7))
    m = build_pattern("benchmark", 10, 16, peers=3, seed=7)
    assert len(m) == 30 and np.all(np.bincount(m.src) == 3)


def test_explicit_pattern_and_errors():
    m = build_pattern("explicit", 3, 0, messages=((0, 1, 5), (2, 0, 7)))
    assert m.dst.tolist() == [1, 0] and m.nbytes.tolist() == [5, 7]
    with pytest.raises(InvalidRequest, match="messages"):
        build_pattern("explicit", 2, 0, messages=((0, 5, 1),))
    with pytest.raises(InvalidRequest, match="pattern"):
        build_pattern("ring", 4, 10)
    with pytest.raises(InvalidRequest, match="grid"):
        build_pattern("halo3d", 8, 10, grid=(2, 2, 3))
    with pytest.raises(InvalidRequest, match="message_bytes"):
        build_pattern("halo3d", 8, 0)
    with pytest.raises(InvalidRequest, match="peers"):
        build_pattern("benchmark", 8, 10)

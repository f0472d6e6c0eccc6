"""The served models' input encoding: what is not a number never reaches float()."""
import numpy as np

from hpcpredict.daemon.runtime.encoding import InputEncoder


def _encoder() -> InputEncoder:
    return InputEncoder().fit([{"n": 1.0, "solver": "cg"}, {"n": 2.0, "solver": "gmres"}])


def test_a_value_that_is_no_number_is_nan_or_missing():
    encoder = _encoder()
    for value in ([1, 2], {"a": 1}, b"12", "12"):
        row = encoder.encode_one({"n": value, "solver": "cg"}, needed=())
        assert row is not None and np.isnan(row[0])
        assert encoder.encode_one({"n": value, "solver": "cg"}) is None   # needed: the row is not predicted


def test_numbers_of_any_kind_are_read():
    encoder = _encoder()
    for value, expected in ((3, 3.0), (np.int64(3), 3.0), (np.float32(2.5), 2.5), (True, 1.0)):
        assert encoder.encode_one({"n": value, "solver": "gmres"})[0] == expected

"""Point-to-point communication patterns as plain message arrays.

A pattern is a :class:`Messages` triple of equal-length numpy arrays ``(src, dst, nbytes)``:
one entry per message of one communication phase (every rank posts its Irecv/Isend, then
Waitall). Patterns of seed 004: the benchmark's random peers, Halo-3D (6 faces), Halo-4D (8
faces), LULESH-1 (26 neighbours), LULESH-2 (7-point: 6 faces), LULESH-3 (wavefront, 13
messages). Process grids are chosen like ``MPI_Dims_create``; ranks sit in the grid in
row-major order (``MPI_Cart_create`` without reordering).

>>> m = build_pattern("halo3d", ntasks=8, message_bytes=1024)
>>> int(m.src.size), int(m.nbytes.sum())          # 2x2x2 grid, open boundary: 3 faces each
(24, 24576)
>>> dims_create(12, 3)
(3, 2, 2)
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidRequest

PATTERNS = ("benchmark", "halo3d", "halo4d", "lulesh1", "lulesh2", "lulesh3", "explicit")
GRID_PATTERNS = {"halo3d": 3, "halo4d": 4, "lulesh1": 3, "lulesh2": 3, "lulesh3": 3}
# LULESH exchanges whole fields of doubles: forces (3 fields) for LULESH-1, viscosity
# gradients (3) for LULESH-2, positions+velocities (6) for LULESH-3. A corner carries one
# value per field, an edge one line of them, a face (``message_bytes``) a plane.
LULESH_FIELD_BYTES = {"lulesh1": 3 * 8, "lulesh2": 3 * 8, "lulesh3": 6 * 8}
MAX_MESSAGE_BYTES = 1 << 34


@dataclass(frozen=True)
class Messages:
    """One communication phase: message ``i`` goes from rank ``src[i]`` to ``dst[i]``."""

    src: np.ndarray      # int64
    dst: np.ndarray      # int64
    nbytes: np.ndarray   # int64
    ntasks: int

    def __len__(self) -> int:
        return int(self.src.size)


def _prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors


def dims_create(nnodes: int, ndims: int) -> tuple[int, ...]:
    """Balanced process grid, non-increasing, like ``MPI_Dims_create`` with all dims free."""
    if nnodes < 1 or ndims < 1:
        raise InvalidRequest("grid", f"cannot split {nnodes} ranks into {ndims} dimensions")
    dims = [1] * ndims
    for factor in sorted(_prime_factors(nnodes), reverse=True):
        dims[int(np.argmin(dims))] *= factor
    return tuple(sorted(dims, reverse=True))


def _grid(ntasks: int, grid: tuple[int, ...], ndims: int) -> tuple[int, ...]:
    if not grid:
        return dims_create(ntasks, ndims)
    if len(grid) != ndims or any(d < 1 for d in grid) or math.prod(grid) != ntasks:
        raise InvalidRequest("grid", f"{grid} is not a {ndims}-D grid of {ntasks} ranks")
    return tuple(int(d) for d in grid)


def _stencil(ntasks: int, dims: tuple[int, ...], offsets: np.ndarray, sizes: np.ndarray,
             periodic: bool) -> Messages:
    """Each rank sends ``sizes[k]`` bytes to its neighbour at ``offsets[k]`` (if it exists)."""
    coords = np.stack(np.unravel_index(np.arange(ntasks), dims), axis=1)       # (N, d)
    target = coords[:, None, :] + offsets[None, :, :]                          # (N, K, d)
    dims_arr = np.asarray(dims)
    if periodic:
        target %= dims_arr
        valid = np.ones(target.shape[:2], dtype=bool)
    else:
        valid = np.all((target >= 0) & (target < dims_arr), axis=2)
    dst_all = np.ravel_multi_index(tuple(np.moveaxis(target % dims_arr, 2, 0)), dims)
    src_all = np.broadcast_to(np.arange(ntasks)[:, None], valid.shape)
    size_all = np.broadcast_to(sizes[None, :], valid.shape)
    valid &= dst_all != src_all          # a periodic dimension of extent 1 or 2 folds back
    return Messages(src_all[valid].astype(np.int64), dst_all[valid].astype(np.int64),
                    size_all[valid].astype(np.int64), ntasks)


def _face_offsets(ndims: int) -> np.ndarray:
    eye = np.eye(ndims, dtype=np.int64)
    return np.concatenate([eye, -eye])


def _lulesh_offsets(half: bool) -> np.ndarray:
    offsets = np.array([o for o in itertools.product((-1, 0, 1), repeat=3) if any(o)], dtype=np.int64)
    if half:
        # Wavefront: send only "downstream" (first non-zero component positive): 13 of 26.
        first = np.array([o[np.flatnonzero(o)[0]] for o in offsets])
        offsets = offsets[first > 0]
    return offsets


def _lulesh_sizes(offsets: np.ndarray, face_bytes: int, field_bytes: int) -> np.ndarray:
    corner = min(field_bytes, face_bytes)
    edge = max(corner, int(round(math.sqrt(face_bytes * field_bytes))))
    nonzero = np.count_nonzero(offsets, axis=1)
    return np.where(nonzero == 1, face_bytes, np.where(nonzero == 2, edge, corner)).astype(np.int64)


def benchmark_peers(ntasks: int, peers: int, seed: int) -> np.ndarray:
    """Peers of the benchmark: ``out[k, r]`` is the rank ``r`` sends to in round ``k``.

    Each round is a random cyclic shift over a random permutation, so every rank sends one
    and receives one message per round and never messages itself. Shared by the real MPI
    benchmark and the simulator so a record's pattern can be regenerated from its seed.
    """
    rng = np.random.default_rng(seed)
    out = np.empty((peers, ntasks), dtype=np.int64)
    for k in range(peers):
        perm = rng.permutation(ntasks)
        shift = int(rng.integers(1, ntasks)) if ntasks > 1 else 0
        out[k, perm] = np.roll(perm, -shift)
    return out


def build_pattern(pattern: str, ntasks: int, message_bytes: int, *, grid: tuple[int, ...] = (),
                  peers: int = 0, messages: tuple[tuple[int, int, int], ...] = (),
                  seed: int = 0) -> Messages:
    """The messages of one phase of ``pattern`` on ``ntasks`` ranks (face size ``message_bytes``)."""
    if pattern not in PATTERNS:
        raise InvalidRequest("pattern", f"unknown pattern {pattern!r} (one of {', '.join(PATTERNS)})")
    if ntasks < 1:
        raise InvalidRequest("ntasks", f"must be >= 1, got {ntasks}")
    if pattern == "explicit":
        if not messages:
            raise InvalidRequest("messages", "the explicit pattern needs (src, dst, bytes) triples")
        arr = np.asarray(messages, dtype=np.int64)
        if arr.ndim != 2 or arr.shape[1] != 3:
            raise InvalidRequest("messages", "each message must be (src, dst, bytes)")
        if arr[:, :2].min() < 0 or arr[:, :2].max() >= ntasks:
            raise InvalidRequest("messages", f"ranks must be in 0..{ntasks - 1}")
        if arr[:, 2].min() < 0 or arr[:, 2].max() > MAX_MESSAGE_BYTES:
            raise InvalidRequest("messages", "message sizes must be in 0..16 GiB")
        return Messages(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(), ntasks)
    if not 0 < message_bytes <= MAX_MESSAGE_BYTES:
        raise InvalidRequest("message_bytes", f"must be in 1..{MAX_MESSAGE_BYTES}, got {message_bytes}")
    if pattern == "benchmark":
        if peers < 1:
            raise InvalidRequest("peers", f"the benchmark pattern needs peers >= 1, got {peers}")
        if ntasks < 2:
            raise InvalidRequest("ntasks", "the benchmark pattern needs at least 2 ranks")
        dst = benchmark_peers(ntasks, peers, seed).ravel()
        src = np.tile(np.arange(ntasks, dtype=np.int64), peers)
        return Messages(src, dst, np.full(src.size, message_bytes, dtype=np.int64), ntasks)
    dims = _grid(ntasks, tuple(grid), GRID_PATTERNS[pattern])
    if pattern in ("halo3d", "halo4d", "lulesh2"):
        offsets = _face_offsets(len(dims))
        sizes = np.full(len(offsets), message_bytes, dtype=np.int64)
        return _stencil(ntasks, dims, offsets, sizes, periodic=(pattern == "halo4d"))
    offsets = _lulesh_offsets(half=(pattern == "lulesh3"))
    sizes = _lulesh_sizes(offsets, message_bytes, LULESH_FIELD_BYTES[pattern])
    return _stencil(ntasks, dims, offsets, sizes, periodic=False)

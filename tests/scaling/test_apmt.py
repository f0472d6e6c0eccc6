"""APMT inputs and decomposition: real perf/MPI files from this machine (no PMU here) and
hand-constructed hardware-counter files (clearly marked, see tests/data/scaling/SOURCES.md)."""
import json
import math
import shutil
from pathlib import Path

import pytest

from hpcpredict.daemon.errors import ParseError
from hpcpredict.daemon.lab.scaling.apmt import ProfiledRun, decompose, fit_against_p, load_runs, select_kernels
from hpcpredict.daemon.lab.scaling.profiles import (
    parse_function_times, parse_mpi_profile, parse_perf_stat)

DATA = Path(__file__).parents[1] / "data" / "scaling"
HERE = DATA / "apmt-this-machine"
HW = DATA / "hw-counters-CONSTRUCTED"


def _real_run(p: int) -> ProfiledRun:
    perf = parse_perf_stat((HERE / f"p{p}.perf.csv").read_text().splitlines(), source=f"p{p}")
    profile = (HERE / f"p{p}.mpi.csv").read_text().splitlines()
    wall = float((HERE / f"p{p}.stdout").read_text().split("wall_s=")[1].split()[0])
    return ProfiledRun(p, perf, tuple(parse_mpi_profile(profile)), wall, parse_function_times(profile))


def test_real_perf_output_from_this_machine_has_no_hardware_counters():
    counters = parse_perf_stat((HERE / "p2.perf.csv").read_text().splitlines())
    assert counters.get("task-clock") > 0.01          # msec converted to seconds
    assert counters.unsupported == ["L1-dcache-loads", "cycles", "instructions"]


def test_real_mpi_profile_and_function_times():
    lines = (HERE / "p4.mpi.csv").read_text().splitlines()
    calls = {c.call: c for c in parse_mpi_profile(lines)}
    assert set(calls) == {"MPI_Sendrecv", "MPI_Allreduce"}
    assert calls["MPI_Allreduce"].count == 4 * 300 and calls["MPI_Allreduce"].bytes == 8 * 4 * 300
    # halos: 2 exchanges per iteration, interior ranks send up and down, 500 doubles each
    assert calls["MPI_Sendrecv"].bytes == 300 * 500 * 8 * 2 * (4 - 1)
    assert set(parse_function_times(lines)) == {"stencil", "copy"}


def test_decompose_real_runs_without_hardware_counters():
    result = decompose([_real_run(p) for p in (1, 2, 3, 4)])
    assert result.compute_source == "function timers"
    runs = [_real_run(p) for p in (1, 2, 3, 4)]
    bare = [ProfiledRun(r.processes, r.counters, r.mpi, r.wall_s) for r in runs]
    assert decompose(bare).compute_source == "task-clock"
    assert any("hardware counters unavailable" in note for note in result.notes)
    assert set(result.p2p_calls) == {"MPI_Sendrecv"} and set(result.collective_calls) == {"MPI_Allreduce"}
    parts = result.components(8.0)
    assert parts["total_s"] >= 0 and parts["comp_s"] >= 0
    assert json.loads(json.dumps(result.to_dict([8])))["predictions"][-1]["processes"] == 8.0


def test_hardware_counter_arithmetic_on_constructed_files():
    runs = load_runs(HW / "manifest.json")
    result = decompose(runs)
    assert result.compute_source == "hardware counters"
    parts = result.components(2.0)
    # T_comp = 1e9 instr * CPI 2 / (2 GHz * 2) = 0.5 s
    assert parts["comp_s"] == pytest.approx(0.5, rel=1e-6)
    # memory cycles: 3.6e8*4 + 3.6e7*40 + 4e6*200 = 3.68e9 -> /(2e9*2) = 0.92 s
    assert parts["mem_s"] == pytest.approx(0.92, rel=1e-6)
    assert result.bf_mem == pytest.approx(2e8 / 3.68e9, rel=1e-6)
    # collective model t = 0.01 log2 P + 1e-6 * bytes + 0.001 is recovered exactly
    assert parts["comm_s"] == pytest.approx(0.01 + 1e-6 * 1600 + 0.001, rel=1e-4)
    extrapolated = result.components(8.0)["comm_s"]
    assert extrapolated == pytest.approx(0.03 + 1e-6 * 6400 + 0.001, rel=1e-3)
    assert result.kernels == ("io", "solve")   # io does not shrink with P; solve > 5 %


def test_fit_against_p_picks_best_r2():
    assert fit_against_p([1, 2, 4, 8], [10 + 80 / p for p in (1, 2, 4, 8)]).function == "a+b/P"
    assert fit_against_p([1, 2, 4, 8], [3 + 2 * math.log2(p) for p in (1, 2, 4, 8)]).function == "a+b*log2P"
    fit = fit_against_p([1, 2, 4, 8], [5 * p ** 1.5 for p in (1, 2, 4, 8)])
    assert fit.function == "a*P^b" and fit(16) == pytest.approx(5 * 64)


def test_kernel_selection_rules():
    runs = [ProfiledRun(p, parse_perf_stat(["1,msec,task-clock,1,100,,"]), functions=f)
            for p, f in ((1, {"big": 100.0, "tiny": 1.0, "flat": 1.0}), (4, {"big": 100.0, "tiny": 1.0, "flat": 4.0}))]
    assert select_kernels(runs) == ["big", "flat"]


def test_too_few_runs_and_bad_files(tmp_path):
    with pytest.raises(ParseError, match=">= 3 distinct"):
        decompose([_real_run(1), _real_run(2)])
    with pytest.raises(ParseError, match="bad-count.mpi.csv:2"):
        parse_mpi_profile((DATA / "negative" / "bad-count.mpi.csv").read_text().splitlines(),
                          source="bad-count.mpi.csv")
    with pytest.raises(ParseError, match="line 1"):
        parse_perf_stat((DATA / "negative" / "short.perf.csv").read_text().splitlines())
    with pytest.raises(ParseError, match="not a number"):
        parse_perf_stat((DATA / "negative" / "nonnumber.perf.csv").read_text().splitlines())
    shutil.copy(HW / "p1.perf.csv", tmp_path / "p1.perf.csv")
    (tmp_path / "m.json").write_text(json.dumps({"runs": [{"processes": 1, "perf": "missing.csv"}]}))
    with pytest.raises(ParseError, match="cannot read"):
        load_runs(tmp_path / "m.json")
    (tmp_path / "m.json").write_text(json.dumps({"runs": [{"perf": "p1.perf.csv"}]}))
    with pytest.raises(ParseError, match="processes"):
        load_runs(tmp_path / "m.json")

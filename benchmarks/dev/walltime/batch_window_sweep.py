"""The scheduling replay of KTH-SP2 and HPC2N under the hpcpredict policy for several batch
windows (ModelParams.batch_window_s; 0 = every job its own calibration unit) and risks:
killed, shortened, allowed, bsld, share of the oracle gain, final adaptive risk offset.

    nice -n 10 .venv/bin/python benchmarks/dev/walltime/batch_window_sweep.py 0,300,600,900 0.03,0.1,0.2,0.3
"""
import sys
from pathlib import Path

from hpcpredict.daemon.history.traces import read_trace
from hpcpredict.daemon.history.model import HpcPredictModel, ModelParams
from hpcpredict.daemon.lab.scheduling.policies import online_predictions
from hpcpredict.daemon.lab.scheduling.replay import replay_policies
from hpcpredict.daemon.lab.scheduling.workload import sim_jobs, trace_machine_size
windows = [float(w) for w in sys.argv[1].split(",")]
risks = [float(r) for r in sys.argv[2].split(",")]
for name in ("KTH-SP2.swf", "hpc2n-subset.swf"):
    path = str(Path(__file__).resolve().parents[3] / "tests" / "data" / "traces" / name)
    records = read_trace(path); procs = trace_machine_size(path)
    wl = sim_jobs(records, procs)
    base = replay_policies(wl, {}, ["user", "oracle"])
    room = base["user"]["mean_bounded_slowdown"] - base["oracle"]["mean_bounded_slowdown"]
    for w in windows:
        for risk in risks:
            model = HpcPredictModel(ModelParams(batch_window_s=w))
            ans = online_predictions(records, risk, model=model)
            s = replay_policies(wl, ans, ["hpcpredict"])["hpcpredict"]
            print(name, w, risk, s["killed"], s["shortened"], round(risk * s["shortened"], 1),
                  round(s["mean_bounded_slowdown"], 3), round((base["user"]["mean_bounded_slowdown"] - s["mean_bounded_slowdown"]) / room, 3),
                  round(model.state.risk_offset, 4), flush=True)

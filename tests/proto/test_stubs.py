import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_committed_stubs_match_the_proto():
    result = subprocess.run([sys.executable, str(REPO / "proto" / "generate.py"), "--check"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"stale stubs, run `python proto/generate.py`:\n{result.stderr}"


def test_contract_has_the_promised_rpcs_and_fields():
    from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

    service = pb.DESCRIPTOR.services_by_name["Predictor"]
    assert {m.name for m in service.methods} >= {"Predict", "PredictAtAllocation", "ReportOutcome",
                                                  "ReloadModels", "ListModels", "GetStatus"}
    estimate = {f.name for f in pb.Estimate.DESCRIPTOR.fields}
    assert estimate >= {"runtime_s", "interval", "comm_time_s", "suggested_time_limit_s", "suggested_time_min_s",
                        "node_advice", "explanation", "model_name", "model_version", "fallback"}

"""`--json` output: counts are JSON numbers, wherever the proto carries them (#40 found the
model metadata's `jobs` printed as a string by `status --json` and `reload --json`)."""
from __future__ import annotations

import json

from hpcpredict.daemon.cli.common import message_dict
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb


def test_counts_are_numbers_and_words_stay_words():
    status = pb.Status(jobs=28481, outcomes=3, models=[pb.ModelInfo(kind="walltime", metadata={
        "jobs": "28481", "trained": "lmp", "version": "v2", "risk": "0.03"})])
    data = json.loads(json.dumps(message_dict(status)))
    assert data["jobs"] == 28481 and data["outcomes"] == 3       # uint64: protobuf's JSON writes "28481"
    assert data["models"][0]["metadata"] == {"jobs": 28481, "trained": "lmp", "version": "v2", "risk": "0.03"}
    reply = message_dict(pb.ReloadReply(models=[pb.ModelInfo(metadata={"jobs": "12"})]))
    assert reply["models"][0]["metadata"]["jobs"] == 12

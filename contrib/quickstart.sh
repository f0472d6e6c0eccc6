#!/usr/bin/env bash
# Quick start: set up, start the daemon on embedded defaults, load the bundled real trace
# (KTH-SP2, Parallel Workloads Archive), train the walltime model, and predict example jobs.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$REPO/contrib/setup.sh"
BIN="${HPCPREDICT_VENV:-$REPO/.venv}/bin"
export HPCPREDICT_DATA_DIR="${HPCPREDICT_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/hpcpredict}"
mkdir -p "$HPCPREDICT_DATA_DIR"
SOCK="$HPCPREDICT_DATA_DIR/hpcpredictd.sock"
if ! "$BIN/python" -c "import grpc,sys; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g
c=grpc.insecure_channel('unix:$SOCK'); sys.exit(0 if g.HealthStub(c).Check(h.HealthCheckRequest(), timeout=1).status==1 else 1)" 2>/dev/null; then
  echo "== starting hpcpredictd (log: $HPCPREDICT_DATA_DIR/hpcpredictd.log)"
  nohup "$BIN/hpcpredictd" > "$HPCPREDICT_DATA_DIR/hpcpredictd.log" 2>&1 &
  for _ in $(seq 100); do [ -S "$SOCK" ] && [ -f "$HPCPREDICT_DATA_DIR/hpcpredictd.json" ] && break; sleep 0.1; done
fi
echo "== ingesting the KTH-SP2 trace (28,481 real jobs)"
"$BIN/hpcpredict" ingest "$REPO/tests/data/traces/KTH-SP2.swf"
echo "== training the walltime model on it"
"$BIN/hpcpredict" train
for example in "$REPO"/contrib/examples/kth-user91-job.sh; do
  echo "== hpcpredict predict $(basename "$example") --user 91"
  "$BIN/hpcpredict" predict "$example" --user 91
done
echo "== the same job for a user with no history"
"$BIN/hpcpredict" predict "$REPO/contrib/examples/lammps-job.sh" --user newcomer
echo "== daemon status"
"$BIN/hpcpredict" status
echo
daemon_pid="$("$BIN/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$HPCPREDICT_DATA_DIR/hpcpredictd.json")"
echo "The daemon keeps running (pid $daemon_pid); stop it with: kill $daemon_pid"

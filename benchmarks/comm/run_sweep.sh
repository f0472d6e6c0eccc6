#!/bin/sh
# Full SimGrid sweep for issue 5 (SIMULATED data): benchmark training sweep + evaluation
# patterns on fresh allocations, on a simulated fat tree and a simulated dragonfly, bursty
# background traffic on; then train and evaluate. Runs niced; ~15-25 min CPU on 2 cores.
#   sh benchmarks/comm/run_sweep.sh [TRAIN_POINTS] [TEST_POINTS_PER_PATTERN]
# SIM_ONLY=1 stops after simulating; SKIP_SIM=1 reuses data/.
set -eu
cd "$(dirname "$0")"
H="nice -n 10 ../../.venv/bin/hpcpredict"
TRAIN=${1:-4000}
TEST=${2:-120}
mkdir -p data models
for fabric in fattree dragonfly; do
  if [ "$fabric" = fattree ]; then shape="3;8,4,4;1,2,2;1,2,2"; bg=6; else shape="4,2;4,1;4,1;4"; bg=8; fi
  if [ "${SKIP_SIM:-0}" = 0 ]; then
  start=$(date +%s)
  $H comm simulate --fabric $fabric --shape "$shape" --pattern benchmark --points "$TRAIN" \
     --seed 1 --background $bg --out data/$fabric-train.csv --topology-out data/$fabric-topology.json
  rm -f data/$fabric-test.csv
  seed=100
  for pattern in halo3d halo4d lulesh1 lulesh2 lulesh3; do
    seed=$((seed + 1))
    # fresh allocations: a different seed than the training sweep
    $H comm simulate --fabric $fabric --shape "$shape" --pattern $pattern --points "$TEST" \
       --seed $seed --background $bg --out data/$fabric-test.csv --append
  done
  echo "$fabric: simulated in $(( $(date +%s) - start )) s"
  fi
  [ "${SIM_ONLY:-0}" = 1 ] && continue
  start=$(date +%s)
  $H comm train data/$fabric-train.csv --topology data/$fabric-topology.json --out models/$fabric --tune-iter 3
  echo "$fabric: trained in $(( $(date +%s) - start )) s"
  $H comm evaluate --model models/$fabric --data data/$fabric-test.csv --topology data/$fabric-topology.json \
     --json > results-$fabric.json
  $H comm evaluate --model models/$fabric --data data/$fabric-test.csv --topology data/$fabric-topology.json \
     --plots scatter-$fabric --title "SIMULATED $fabric $shape (SimGrid 3.32)" | tee results-$fabric.txt
done

#!/bin/sh
# Full SimGrid sweep for issue 5 (SIMULATED data): benchmark training sweep + evaluation
# patterns on fresh allocations, on a simulated fat tree and a simulated dragonfly, bursty
# background traffic on; then train and evaluate. Runs niced; ~20-30 min CPU on 2 cores.
#   sh benchmarks/comm/run_sweep.sh [TRAIN_POINTS] [TEST_POINTS_PER_PATTERN]
# STAGES (default "train-sim test-sim fit") selects what runs; data/ is reused otherwise.
set -eu
cd "$(dirname "$0")"
H="nice -n 10 ../../.venv/bin/hpcpredict"
TRAIN=${1:-4000}
TEST=${2:-120}
STAGES=${STAGES:-"train-sim test-sim fit"}
TRAIN_SET=${TRAIN_SET:-train}      # data/FABRIC-$TRAIN_SET.csv (train-ext: with the PM 5-26 extension)
MODELS=${MODELS:-/tmp/hpcpredict-comm-models}   # ~25 MB per fabric: not kept in the repo
RESULTS=${RESULTS:-v3-relative}                  # results JSON/TXT and scatter PNGs (v1-paper-ranges: before the _rel inputs)
has() { case " $STAGES " in *" $1 "*) return 0;; esac; return 1; }
mkdir -p data "$MODELS" "$RESULTS"
for fabric in fattree dragonfly; do
  if [ "$fabric" = fattree ]; then shape="3;8,4,4;1,2,2;1,2,2"; bg=6; else shape="4,2;4,1;4,1;4"; bg=8; fi
  start=$(date +%s)
  if has train-sim; then
    $H comm simulate --fabric $fabric --shape "$shape" --pattern benchmark --points "$TRAIN" \
       --seed 1 --background $bg --out data/$fabric-train.csv --topology-out data/$fabric-topology.json
  fi
  if has test-sim; then
    rm -f data/$fabric-test.csv
    seed=100
    for pattern in halo3d halo4d lulesh1 lulesh2 lulesh3; do
      seed=$((seed + 1))
      # fresh allocations: other seeds than the training sweep
      $H comm simulate --fabric $fabric --shape "$shape" --pattern $pattern --points "$TEST" \
         --seed $seed --background $bg --out data/$fabric-test.csv --append
    done
  fi
  echo "$fabric: simulated in $(( $(date +%s) - start )) s"
  if has fit; then
    start=$(date +%s)
    $H comm train data/$fabric-$TRAIN_SET.csv --topology data/$fabric-topology.json --out "$MODELS/$fabric" --tune-iter 3
    echo "$fabric: trained in $(( $(date +%s) - start )) s"
    $H comm evaluate --model "$MODELS/$fabric" --data data/$fabric-test.csv --topology data/$fabric-topology.json \
       --json > "$RESULTS/results-$fabric.json"
    $H comm evaluate --model "$MODELS/$fabric" --data data/$fabric-test.csv --topology data/$fabric-topology.json \
       --plots "$RESULTS/scatter-$fabric" --title "SIMULATED $fabric $shape (SimGrid 3.32)" | tee "$RESULTS/results-$fabric.txt"
  fi
done

#!/bin/sh
# Extension of the benchmark sweep beyond the paper's PM 1-4: PM 5-26 (the evaluation
# patterns send up to 26 messages per rank). SIMULATED; appends to data/FABRIC-train-pm.csv.
#   sh benchmarks/comm/run_pm_extension.sh [POINTS]
set -eu
cd "$(dirname "$0")"
H="nice -n 10 ../../.venv/bin/hpcpredict"
N=${1:-800}
for fabric in dragonfly fattree; do
  if [ "$fabric" = fattree ]; then shape="3;8,4,4;1,2,2;1,2,2"; bg=6; else shape="4,2;4,1;4,1;4"; bg=8; fi
  start=$(date +%s)
  $H comm simulate --fabric $fabric --shape "$shape" --pattern benchmark --points "$N" --peers 5-26 \
     --seed 7 --background $bg --out data/$fabric-train-pm.csv
  cat data/$fabric-train.csv > data/$fabric-train-ext.csv
  tail -n +2 data/$fabric-train-pm.csv >> data/$fabric-train-ext.csv
  echo "$fabric: PM 5-26 sweep simulated in $(( $(date +%s) - start )) s"
done

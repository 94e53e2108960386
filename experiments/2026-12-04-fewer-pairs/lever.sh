#!/usr/bin/env bash
# One lever run of this experiment, from the repository root (data/geo-quick made by the quick
# profile): the quick profile on one rank of one thread, float32 under the AVX2 stand-in, a
# budget of 200,000 pairs (5 epochs of Geo quick's 40k), then its record on the 10k test pairs.
# usage: lever.sh NAME SEED_INDEX RUN_SEED [--set key=value ...]  (later --set's override these)
# (the benchmark's run seeds: 0 130836866, 1 1755909585, 2 1452277621)
set -euo pipefail
name=$1; s=$2; rs=$3; shift 3
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-lever-$name
bin=${VENV:-.venv}/bin
date
"$bin/flowcaps" train data/geo-quick --profile quick --set seed="$rs" --set cpu_ranks=1 \
  --set threads=1 --set max_minutes=null --set epochs=5 "$@" --out "runs/$name" --quiet
date
"$bin/flowbench" run flowcaps --checkpoint "runs/$name/model.pt" --seeds "$s" \
  --results "runs/rec-$name" --runs "runs/$name/flowbench"
date

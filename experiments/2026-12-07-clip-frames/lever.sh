#!/usr/bin/env bash
# Needs commit 98f23c3 (the `clip_frames` switch, removed since; see README.md).
# One run of this experiment, from the repository root: the quick profile on one rank of one
# thread, float32 under the AVX2 stand-in, trained on DATA (clips of T frames, made by
# make_clips.py) for EPOCHS passes, then its record on Geo quick's 10k test pairs
# (data/geo-quick, the quick profile's folder), as experiments/2026-12-04-fewer-pairs/lever.sh.
# usage: lever.sh NAME SEED_INDEX RUN_SEED DATA EPOCHS [--set key=value ...]
# (the benchmark's run seeds: 0 130836866, 1 1755909585, 2 1452277621)
set -euo pipefail
name=$1; s=$2; rs=$3; data=$4; epochs=$5; shift 5
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-lever-$name
bin=${VENV:-.venv}/bin
date
"$bin/flowcaps" train "$data" --profile quick --set seed="$rs" --set cpu_ranks=1 \
  --set threads=1 --set max_minutes=null --set epochs="$epochs" --set bf16=false "$@" \
  --out "runs/$name" --quiet
date
"$bin/flowbench" run flowcaps --checkpoint "runs/$name/model.pt" --seeds "$s" \
  --results "runs/rec-$name" --runs "runs/$name/flowbench"
date

#!/usr/bin/env bash
# The quick profile's two ranks with the candidate change (global batch 16, warm-up 200 steps,
# the ring prior faded out over a quarter of the run), float32 under the AVX2 stand-in, budgeted
# in pairs instead of minutes, then the record on the 10k test pairs. From the repository root.
# usage: two_ranks.sh NAME SEED_INDEX RUN_SEED EPOCHS   (Geo quick has 40k training pairs)
set -euo pipefail
name=$1; s=$2; rs=$3; epochs=$4
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-two-ranks
bin=${VENV:-.venv}/bin
date
"$bin/flowcaps" train data/geo-quick --profile quick --set seed="$rs" --set batch_size=16 \
  --set warmup_steps=200 --set prior_anneal=0.25 --set max_minutes=null --set epochs="$epochs" \
  --out "runs/$name" --quiet
date
"$bin/flowbench" run flowcaps --checkpoint "runs/$name/model.pt" --seeds "$s" \
  --results "runs/rec-$name" --runs "runs/$name/flowbench"
date

#!/bin/bash
# FlowCapsules' `paper` profile (the paper's model, losses and schedule: docs/deviations.md,
# "The paper profile") trained on one GPU, then scored by flowbench like every other run.
#
#   scripts/paper_gpu.sh                      # Geo at the paper's scale: 150 epochs of 100k pairs
#   DATA=DIR PAIRS=128 DEVICE=cpu TEST_LIMIT=8 scripts/paper_gpu.sh   # a check of the steps
#
# Expected time (an estimate, not a measurement on a GPU): on one thread of a loaded 2-core
# CPU, an eager float32 step trained 3.7 pairs/s with the paper profile and 58 with the gpu
# profile (batch 8, 64 px, 2026-12-08); one H100 ran the gpu profile at about 4,700 pairs/s
# (1.47M pairs in 5.25 minutes), 80 times that CPU thread. The same factor gives the paper
# profile about 300 pairs/s: its 15M pairs (150 epochs of 100k) in about 14 hours on one H100,
# plus about 10 minutes to make the data and 5 to score 10k test pairs. Its step costs 16
# times the gpu profile's per pair on the CPU (every loss over all 4,096 pixels with a 6-layer
# decoder, against 256 sampled points and 3 layers); that work parallelises well, so a GPU may
# well be faster than this: time the first minutes (the log's pairs/s) before trusting it.
#
# DATA: a Geo folder (default: the paper profile's, data/geo-paper, made here if missing);
# OUT: the run folder (resumable: the same command continues it); RESULTS: the record tree;
# PAIRS: a budget in pairs instead of the 150 epochs; TEST_LIMIT: score only that many test
# pairs (a partial record, which the tables skip); TRAIN_ARGS: more `flowcaps train` options
# (e.g. '--set batch_size=16' for a small check set); PYTHON: the interpreter (default python3).
set -euo pipefail
DATA=${DATA:-data/geo-paper}
OUT=${OUT:-runs/flowcaps-paper}
RESULTS=${RESULTS:-runs/records}
DEVICE=${DEVICE:-cuda}
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [[ ! -e $DATA/manifest.json ]]; then
    # the paper's split: 100k training, 10k test pairs at 64 px (benchmark.profiles "paper")
    "$PY" -m geogen.cli make --variant geo --n 100000 --val 10000 --test 10000 --size 64 --out "$DATA"
fi
"$PY" -m flowcaps.cli train "$DATA" --profile paper --out "$OUT" --device "$DEVICE" \
    ${PAIRS:+--pairs "$PAIRS"} ${TRAIN_ARGS:-}
"$PY" -m benchmark.cli run flowcaps --dataset geo --profile paper --data "$DATA" \
    --checkpoint "$OUT/model.pt" --device "$DEVICE" --results "$RESULTS" \
    ${TEST_LIMIT:+--test-limit "$TEST_LIMIT"}

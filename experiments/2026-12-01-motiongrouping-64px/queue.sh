#!/bin/bash
# Runs probes one after another: lines of "DATA VARIANT STEPS BATCH" from the file $1; each
# writes runs/p64/<data>-<variant>/ and appends its two result lines to runs/p64/results.txt.
set -u
export PYTHONPATH=$PWD OMP_NUM_THREADS=1
mkdir -p runs/p64
while read -r data variant steps batch; do
  [ -z "$data" ] && continue
  out="runs/p64/$(basename "$data")-$variant-$steps"
  [ -e "$out/model.pt" ] && continue
  nice -n 19 /work/main/.venv/bin/python experiments/2026-12-01-motiongrouping-64px/probe64.py \
    "$data" "$out" "$variant" "$steps" "$batch" 200 2>"$out.err" | sed "s|^|$(basename "$data") $steps |" >>runs/p64/results.txt
done <"$1"

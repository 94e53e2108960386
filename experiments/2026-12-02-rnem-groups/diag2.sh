# Longer diagnostics: 60 updates of batch 4 on 3-frame clips, ownership every 10 updates.
# From the repository root: sh experiments/2026-12-02-rnem-groups/diag2.sh NAME MODEL [NICE]
export PYTHONPATH=$PWD OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 DIAG=${DIAG:-10} EVERY=10 SCORE=${SCORE:-0}
E=experiments/2026-12-02-rnem-groups
echo "$(date -u +%H:%M:%S) start $1 (nice ${3:-19}) ${SWITCH:-}" >> $E/runlog.txt
nice -n ${3:-19} /work/main/.venv/bin/python $E/probe.py data/geo-quick-t10 data/geo-quick 30 \
  "{\"model\": $2, \"batch_size\": 4, \"clip_frames\": 3, \"max_clips\": 400}" 0 ${STEPS:-60} \
  > $E/d_$1.log 2>&1
echo "$(date -u +%H:%M:%S) end $1" >> $E/runlog.txt

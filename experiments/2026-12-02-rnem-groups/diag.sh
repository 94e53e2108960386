# The seconds-cheap diagnostics: 20 updates of batch 4 on 3-frame clips (400 training clips),
# ownership every 5 updates, no score. From the repository root: sh experiments/.../diag.sh
export PYTHONPATH=$PWD OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 DIAG=5 EVERY=5 SCORE=0
E=experiments/2026-12-02-rnem-groups
run() {  # name, model overrides
  echo "$(date -u +%H:%M:%S) start $1" >> $E/runlog.txt
  nice -n 19 /work/main/.venv/bin/python $E/probe.py data/geo-quick-t10 data/geo-quick 30 \
    "{\"model\": $2, \"batch_size\": 4, \"clip_frames\": 3, \"max_clips\": 400}" 0 20 \
    > $E/d_$1.log 2>&1
  echo "$(date -u +%H:%M:%S) end $1" >> $E/runlog.txt
}
run pixel_median_eps '{"colour": "pixel", "prior": "median", "e_epsilon": 1e-6}'
run bg_median_group '{"background_group": true, "prior": "median", "num_groups": 4}'
run bg_median_pixel '{"background_group": true, "prior": "median", "num_groups": 4, "colour": "pixel"}'
run pixel_median '{"colour": "pixel", "prior": "median"}'
run fixed_profile '{}'

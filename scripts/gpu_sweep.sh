#!/bin/bash
# FlowCapsules' gpu profile with several config overrides side by side on one GPU, each
# evaluated by flowbench on its dataset's test split; everything that matters comes back as one
# tar per run.
#
#   scripts/gpu_sweep.sh MINUTES 'name:--set key=value --set key=value' 'name2@geo+:' ...
#
# A run trains on Geo unless its name ends in @geo+; a Geo+ run also trains on Geo's training
# pairs (--mix-data), with the rest of the geo+ recipe of flowcaps.profiles, as `flowbench run
# flowcaps --dataset geo+` does ('--set mix_data=null --set mix_first=0' trains on Geo+ alone). DATA_GEO / DATA_GEOPLUS name other data
# folders (taken as they are, e.g. a smaller set for a dry run on the CPU with DEVICE=cpu),
# EVAL_ARGS adds options to every evaluation (e.g. --test-limit 100). Uses the machine's own python3 (torch,
# h5py, click, tqdm, scipy, scikit-learn, scikit-image) with this checkout on PYTHONPATH. Steps:
# make data/geo-gpu and data/geoplus-gpu (the paper's 100k training pairs) where a run needs
# them; a 20-step check of training and evaluation on the GPU (which also warms
# torch.compile's cache); then the runs, then their evaluations, all in parallel.
set -u
OUT=${OUT:-gpu-out}
minutes=$1; shift
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')" || exit 1
# Records name the commit; a copy without .git takes it from FLOWBENCH_SOURCE_COMMIT if set.
git rev-parse HEAD 2>/dev/null || echo "no git here; records say commit ${FLOWBENCH_SOURCE_COMMIT:-unknown}"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
names=(); seeds=(); sets=(); datasets=()
for spec in "$@"; do
    name=${spec%%:*}; dataset=geo
    [[ $name == *@* ]] && { dataset=${name#*@}; name=${name%@*}; }
    names+=("$name"); datasets+=("$dataset"); sets+=("${spec#*:}")
    # a run's record names its seed: take it from the run's --seed (default 0)
    seed=$(sed -n 's/.*--seed[ =]\([0-9][0-9]*\).*/\1/p' <<< "${spec#*:}"); seeds+=("${seed:-0}")
done
# shellcheck disable=SC2068  # one argument per dataset named
python3 -c "
import sys
from benchmark import datasets
from benchmark.profiles import default_data_root
for d in sorted(set(sys.argv[1:])):
    if d == 'geo' and '${DATA_GEO:-}' or d == 'geo+' and '${DATA_GEOPLUS:-}':
        continue
    root = default_data_root(d, 'gpu')
    datasets.ensure(datasets.profile_config(d, 'gpu', root), root, may_make=True,
                    own_folder=True, progress=False)
" $([ "${CHECK:-1}" != 0 ] || [[ " ${datasets[*]} " == *" geo+ "* ]] && echo geo) ${datasets[@]} \
    || exit 1  # the check trains on Geo, and so do the Geo+ runs in part
stamp "data ready"
folder() { [ "$1" = geo+ ] && echo "${DATA_GEOPLUS:-data/geoplus-gpu}" || echo "${DATA_GEO:-data/geo-gpu}"; }
train() {  # name, dataset, extra args... (a run's own --set comes last and wins)
    local name=$1 dataset=$2; shift 2
    local mix=()
    [ "$dataset" = geo+ ] && mix=(--mix-data "$(folder geo)")
    OMP_NUM_THREADS=4 python3 -m flowcaps.cli train "$(folder "$dataset")" --profile gpu \
        --device "${DEVICE:-cuda}" --out "runs/sweep/$name" --quiet ${mix[@]+"${mix[@]}"} "$@"
}
evaluate() {  # name, dataset, extra args...
    local name=$1 dataset=$2; shift 2
    OMP_NUM_THREADS=4 python3 -m benchmark.cli run flowcaps --profile gpu --dataset "$dataset" \
        --checkpoint "runs/sweep/$name/model.pt" --results "runs/sweep/$name/results" \
        --runs "runs/sweep/$name/flowbench" --data "$(folder "$dataset")" ${EVAL_ARGS:-} "$@"
}
# CHECK=0 skips the check (a short lease: each run then compiles inside its own budget)
if [ "${CHECK:-1}" != 0 ]; then
    if ! { train check geo --epochs 1 --max-pairs 2560 > "$OUT/check.log" 2>&1 &&
           evaluate check geo --test-limit 200 >> "$OUT/check.log" 2>&1; }; then
        tail -n 20 "$OUT/check.log"; stamp "the GPU check failed"; exit 1
    fi
    stamp "GPU check passed"
fi
for i in "${!names[@]}"; do
    # shellcheck disable=SC2086  # the overrides are meant to split into words
    train "${names[$i]}" "${datasets[$i]}" --max-minutes "$minutes" ${sets[$i]} \
        > "$OUT/${names[$i]}.log" 2>&1 &
done
wait
stamp "training done"
for i in "${!names[@]}"; do
    evaluate "${names[$i]}" "${datasets[$i]}" --seeds "${seeds[$i]}" >> "$OUT/${names[$i]}.log" 2>&1 &
done
wait
stamp "evaluation done"
for name in "${names[@]}"; do
    echo "== $name"; tr '\r' '\n' < "$OUT/$name.log" | grep -v "it/s\|batch/s\|^\s*$" | tail -n 4
    python3 -c "
import json, sys, glob
for f in glob.glob('runs/sweep/$name/results/**/*.json', recursive=True):
    m = json.load(open(f))['metrics']
    print('amodal IoU', {k: round(v, 3) for k, v in m['amodal_iou'].items()},
          'per image', round(m['amodal_iou_per_image']['all'], 3))
" 2>/dev/null
done
# one tar per run: the device returns files up to a size limit, and one tar of every run's
# checkpoint outgrew it with wider encoders
for name in "${names[@]}"; do
    tar cf "$OUT/$name.tar" "runs/sweep/$name/model.pt" "runs/sweep/$name/log.csv" \
        "runs/sweep/$name/results" 2>/dev/null
done
ls -la "$OUT"

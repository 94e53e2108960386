# issue 51 experiment: the quick profile with the official E-step epsilon (1e-6), Geo seed 0
cd "$(git rev-parse --show-toplevel)"  # the lead ran it from a detached worktree at 549fd3c
export PYTHONPATH=$PWD OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
P=/work/main/.venv/bin/python
$P -c "
from baselines.rnem import profile, train
cfg = profile('quick', 'runs/rnem-eps').replace(seed=1800933657, model={'e_epsilon': 1e-6})
print(train(cfg, 'data/geo-quick-t10'))
" > runs-rnem-eps-train.log 2>&1
$P -c "from benchmark.cli import main; main()" run rnem --dataset geo --profile quick --seeds 0 --checkpoint runs/rnem-eps/model.pt --results runs/new > runs-rnem-eps-eval.log 2>&1

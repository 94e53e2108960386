# issue 54: the official K = 2 at the quick profile, Geo seed 0 (experiment, not a record)
cd "$(git rev-parse --show-toplevel)"  # the lead ran it from a detached worktree at cd116e0
export PYTHONPATH=$PWD OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
/work/main/.venv/bin/python -c "
from pathlib import Path
from benchmark.registry import Axes
from benchmark.runner import RunRequest, run
run(RunRequest(method='motiongrouping', dataset='geo', profile='quick', seeds=(0,), results=Path('runs/new'), variant=Axes(num_capsules=2)))
" > run.log 2>&1

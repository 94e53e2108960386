#!/bin/bash
# loop.sh N OUT [--run-program]: N torchrun runs of rank.py; counts the failed ones in OUT/status
here=$(cd "$(dirname "$0")" && pwd); mkdir -p "$2"; fails=0
for i in $(seq 1 "$1"); do
  PYTHONFAULTHANDLER=1 OMP_NUM_THREADS=1 LOGLEVEL=ERROR python -m torch.distributed.run \
    --nproc-per-node 2 --standalone "$here/rank.py" $3 > "$2/run$i.txt" 2>&1 \
    && rm "$2/run$i.txt" || fails=$((fails + 1))
  echo "$i runs, $fails failed" > "$2/status"
done

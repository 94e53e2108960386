# A probe at the quick profile's own batch (16) and clips (10 frames, 11 EM steps), 20 minutes
# of training on the first 8,000 clips of data/geo-quick-t10, one thread at normal priority,
# then the first 200 test pairs of data/geo-quick scored.
# From the repository root: sh experiments/2026-12-02-rnem-groups/probe_quick.sh NAME JSON [SEED]
export PYTHONPATH=$PWD OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 DIAG=100 EVERY=20 TESTN=200
E=experiments/2026-12-02-rnem-groups
echo "$(date -u +%H:%M:%S) start probe $1 (normal priority) $2" >> $E/runlog.txt
/work/main/.venv/bin/python $E/probe.py data/geo-quick-t10 data/geo-quick 20 "$2" ${3:-0} \
  > $E/p_$1.log 2>&1
echo "$(date -u +%H:%M:%S) end probe $1" >> $E/runlog.txt

# 4 minutes of quick training on Geo, twice: glibc's default allocator thresholds ("base"), then both
# raised through glibc's environment variables ("env", read by every process torchrun starts). Run from
# the repository root at commit 98c817e (before flowcaps.allocator), alone on the CPU.
set -e
for v in base env; do
  if [ $v = env ]; then export MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824; fi
  /usr/bin/time -f "$v wall %e user %U sys %S minflt %R" \
    flowcaps train data/geo-quick --profile quick --seed 1 --max-minutes 4 --out runs/ab/$v --quiet
done

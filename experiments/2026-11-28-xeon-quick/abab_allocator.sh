# Interleaved allocator A/B: glibc's defaults ("base") against both thresholds at 1 GiB through
# glibc's environment variables ("env"), 2 minutes of quick training each, base env base env.
# Run from the root of a checkout of 98c817e (before flowcaps.allocator), alone on the CPU.
for i in 1 2; do
  for v in base env; do
    if [ $v = env ]; then E="MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824"; else E="X=1"; fi
    env $E /usr/bin/time -f "$v$i wall %e user %U sys %S minflt %R" python -m flowcaps.cli train \
      data/geo-quick --profile quick --seed 1 --max-minutes 2 --out runs/abab/$v$i --quiet
  done
done

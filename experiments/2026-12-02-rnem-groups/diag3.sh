# The E-step softened after the groups leave the prior (TrainConfig.early_updates): 150 updates
# of batch 4 on 3-frame clips. From the repository root: sh .../diag3.sh [NICE]
D=experiments/2026-12-02-rnem-groups/diag2.sh
for s in 0.25 0.15 0.1; do
  STEPS=150 sh $D early50_sigma$s "{\"sigma\": $s}, \"early_updates\": 50, \"early_sigma\": 0.07" $1
done

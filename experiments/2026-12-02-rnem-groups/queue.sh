# The switch diagnostics, one after the other: sh experiments/2026-12-02-rnem-groups/queue.sh [NICE]
D=experiments/2026-12-02-rnem-groups/diag2.sh
STEPS=100 sh $D fixed_100 "{}" $1
STEPS=100 SWITCH='50 {"e_epsilon": 1e-6}' sh $D fixed_eps_at50 "{}" $1
STEPS=100 SWITCH='50 {"sigma": 0.25}' sh $D fixed_sigma025_at50 "{}" $1

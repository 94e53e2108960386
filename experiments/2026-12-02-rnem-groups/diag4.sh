# The median-prior candidates for longer: 600 updates of batch 4 on 3-frame clips, ownership
# every 100. From the repository root: sh .../diag4.sh [NICE]
D=experiments/2026-12-02-rnem-groups/diag2.sh
export STEPS=600 DIAG=100
sh $D long_pixel_median_eps '{"colour": "pixel", "prior": "median", "e_epsilon": 1e-6}' $1
sh $D long_image_median_eps '{"colour": "image", "prior": "median", "e_epsilon": 1e-6}' $1
sh $D long_bg_median_pixel '{"background_group": true, "prior": "median", "num_groups": 4, "colour": "pixel"}' $1

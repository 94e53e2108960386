"""A stage-1 run checkpoint's config changed in fields that act in stage 2 only, so that the run
goes on under the new profile (its stage 1 is the one the new profile trains).

    python experiments/2026-12-07-psd-fresh-adam/reconfig.py CHECKPOINT [FIELD=VALUE ...]

Refuses a checkpoint past its switch. Default change: `stage2_fresh_optimizer=true`.
"""
import json
import sys

from baselines.psd import checkpoint
from trainloop.checkpoint import save_blob

path, args = sys.argv[1], sys.argv[2:]
changes = {k: json.loads(v) for k, v in (a.split("=", 1) for a in args)} or \
    {"stage2_fresh_optimizer": True}
blob = checkpoint.read(path)
if "stage2_step" in json.loads(blob["progress"]):
    sys.exit(f"reconfig.py: {path} is past its switch to stage 2")
blob["config"] = checkpoint.config_of(blob).replace(**changes).to_json()
save_blob(path, blob)
print(f"{path}: {changes}")

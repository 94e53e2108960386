"""Stage 2 of a PSD run trained afresh from its stage-1 copy, for a number of pairs.

    python experiments/2026-12-06-psd-stage2-pairs/stage2.py STAGE1 DATA OUT PAIRS [FIELD=VALUE ...]

STAGE1 a run's `stage1.pt` (written at its switch: the weights as stage 1 left them and, in its
meta, the active dimensions the run chose). The copy's weights are loaded, the same dimensions
set active (stage 2: the motion encoder frozen, the grid of `stage2_feature_stride`), and stage
2 trained for PAIRS pairs on one thread with the run's losses, batch and learning rates, the KL
at its full weight, and a fresh Adam (the run's own continued its stage-1 state). Writes
OUT/model.pt (resumable from OUT/checkpoint.pt, as any run). FIELD=VALUE pairs change train
fields of the run's config for stage 2 (values read as JSON: `w_local=0.5`;
`model.stage2_flow="active"` a model field).
"""
import json
import sys
from pathlib import Path

import torch

import trainloop
from baselines.psd import checkpoint
from baselines.psd.data import load_train, load_visible, part_names
from baselines.psd.trainer import PsdTask


class FromStage1(PsdTask):
    """PSD's task whose model starts from a stage-1 copy with its chosen dimensions active."""

    def __init__(self, blob, dims, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blob, self.dims = blob, dims

    def build(self, device):
        model = super().build(device)
        model.load_state_dict(self.blob["model"])
        model.set_active(self.dims)
        return model


def main(stage1: str, data: str, out: str, pairs: int, changes: dict | None = None) -> None:
    blob = checkpoint.read(stage1)
    dims = checkpoint.meta_of(blob)["active_dims"]
    run = checkpoint.config_of(blob)
    changes = changes or {}
    model = {k[len("model."):]: v for k, v in changes.items() if k.startswith("model.")}
    train = {k: v for k, v in changes.items() if not k.startswith("model.")}
    cfg = run.replace(out=out, max_minutes=None, steps=-(-pairs // run.loop.batch_size), starts=1,
                      kl_warmup=0.0, stage1_fraction=0.05, threads=1, model=model, **train)
    cfg.validate()
    frames, flow = (torch.from_numpy(a) for a in load_train(data, cfg.max_pairs))
    task = FromStage1(blob, dims, cfg, frames, flow, load_visible(data, cfg.probe_pairs),
                      part_names(data))
    trainloop.fit(task, cfg.loop, (frames, flow),
                  meta={"from": stage1, "active_dims": dims, "stage2_pairs": pairs,
                        "changes": changes})
    print(Path(out) / "model.pt")


if __name__ == "__main__":
    fields = dict(arg.split("=", 1) for arg in sys.argv[5:])
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]),
         {k: json.loads(v) for k, v in fields.items()})

"""Stage 2 continued from a finished PSD run, with the image features at another grid.

    python experiments/2026-12-06-psd-feature-stride/finetune.py MODEL DATA OUT MINUTES STRIDE

MODEL a finished long-profile run's `model.pt` (stage 2, its active dimensions chosen); the
weights keep their shapes when `feature_stride` changes (the image encoder's second stride-2
conv runs at stride 1), so both arms start from the same weights, with a fresh Adam at the
run's learning rates, the run's losses and batch, for MINUTES of training on one thread.
Writes OUT/model.pt (resumable from OUT/checkpoint.pt, as any run).
"""
import sys
from pathlib import Path

import torch

import trainloop
from baselines.psd import checkpoint
from baselines.psd.data import load_train, load_visible, part_names
from baselines.psd.trainer import PsdTask


class FromRun(PsdTask):
    """PSD's task whose model starts from a finished run's weights, in stage 2."""

    def __init__(self, blob, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.blob = blob

    def build(self, device):
        model = super().build(device)
        model.load_state_dict(self.blob["model"])  # the active set is a buffer: stage 2 as it was
        assert model.stage2, "the run never reached stage 2"
        return model


def main(model: str, data: str, out: str, minutes: float, stride: int) -> None:
    blob = checkpoint.read(model)
    run = checkpoint.config_of(blob)
    cfg = run.replace(out=out, max_minutes=minutes, steps=10_000_000, starts=1, kl_warmup=0.0,
                      stage1_fraction=0.05, threads=1, model={"feature_stride": stride})
    cfg.validate()
    frames, flow = (torch.from_numpy(a) for a in load_train(data, cfg.max_pairs))
    task = FromRun(blob, cfg, frames, flow, load_visible(data, cfg.probe_pairs), part_names(data))
    trainloop.fit(task, cfg.loop, (frames, flow),
                  meta={"from": model, "feature_stride": stride})
    print(Path(out) / "model.pt")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))

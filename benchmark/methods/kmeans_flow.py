"""k-means on the exact flow: a calibration row for Table 1, not a competitor.

Letters: B batch, K clusters (the data's parts and the background), H = W image side,
P = H * W pixels.

It trains nothing (`train = None`: the runner scores its config, the model below, directly). For
each test pair it clusters the generator's forward flow, frame 0 -> 1, pixel by pixel with
scikit-learn's KMeans, and returns the K cluster maps as visible masks (one-hot, so `masks` and
`visible` are the same maps and it gives no amodal masks). Since it sees the test pair's true
flow it is what a method given that flow (PSD, Motion Grouping) could reach by grouping pixels
that move alike: an upper reference for those, docs/baselines/kmeans-flow.md.

- K = the data's slots + 1 (Geo's three shapes and the background: 4; the articulated
  figure's ten parts and the background: 11), or Table 3's K where a run sets it.
- Each pixel's point is its flow (dx, dy) in pixels, nothing else: on Geo the exact flow
  alone already separates every part (per-image IoU 1.0 on the first 40 test pairs), so pixel
  positions, which could split a large part in two, are left out. Pixels of equal flow are one
  point weighted by their count (the same k-means objective, far fewer points: a rigid
  translation gives each part one flow).
- KMeans' random_state is the run seed (the same for every pair); one k-means++ start.
- features: none (B, 0); it has nothing learned to cluster and fills no Table 2.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.errors import BenchmarkError
from benchmark.methods.glue import refuse_axes
from benchmark.registry import Axes, LoadedModel, Prediction, TrainSpec, register


@register
class KMeansFlowMethod:
    name = "kmeans-flow"
    title = "k-means on the exact flow (calibration)"
    budgets = {"smoke": "no training: seconds",
               "quick": "no training: 23 minutes for the 10,000 Geo test pairs on a 2-core "
                        "CPU shared with two training runs (data made where missing not "
                        "counted)"}
    uses_ground_truth = ("flow",)
    amodal = False
    tables = (1,)
    train = None  # nothing to train: the runner evaluates `config(spec)` as the model

    def config(self, spec: TrainSpec) -> dict[str, Any]:
        refuse_axes("kmeans-flow", spec.variant, allowed=("num_capsules",))
        k = spec.variant.num_capsules or len(spec.slots) + 1
        return {"clusters": int(k), "random_state": int(spec.seed),
                "test_time_input": "the ground-truth flow 0 -> 1"}

    def axes(self, spec: TrainSpec) -> Axes:
        return Axes(num_capsules=self.config(spec)["clusters"])

    def load(self, checkpoint: Path) -> LoadedModel:
        raise BenchmarkError("kmeans-flow trains nothing and has no checkpoint: "
                             "`flowbench run kmeans-flow` scores it directly")

    def predict(self, model: dict, img0: np.ndarray, img1: np.ndarray, *,
                gt_flow: np.ndarray | None = None) -> Prediction:
        if gt_flow is None:
            raise BenchmarkError("kmeans-flow clusters the ground-truth flow: pass gt_flow")
        labels = np.stack([cluster_flow(f, model["clusters"], model["random_state"])
                           for f in gt_flow])  # (B, H, W)
        k = model["clusters"]
        onehot = (labels[:, None] == np.arange(k)[None, :, None, None])  # (B, K, H, W)
        masks = onehot.astype(np.float32)
        return Prediction(masks=masks, visible=masks, flow=None,
                          features=self.embed(model, img0, gt_flow=gt_flow))

    def embed(self, model: dict, img0: np.ndarray, *,
              gt_flow: np.ndarray | None = None) -> np.ndarray:
        return np.zeros((len(img0), 0), np.float32)  # (B, 0): nothing learned to cluster


def cluster_flow(flow: np.ndarray, k: int, random_state: int) -> np.ndarray:
    """One image's flow (2, H, W) in pixels -> (H, W) cluster labels in 0..k-1 (KMeans)."""
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning
    _, h, w = flow.shape
    points, inverse, counts = np.unique(flow.reshape(2, -1).T.astype(np.float64), axis=0,
                                        return_inverse=True, return_counts=True)  # (U, 2)
    if len(points) <= k:  # no more distinct flows than clusters: each is its own cluster
        return inverse.reshape(h, w)
    with warnings.catch_warnings():
        # Weighted points that coincide after the init can leave a cluster empty; that is an
        # answer, not a fault.
        warnings.simplefilter("ignore", ConvergenceWarning)
        km = KMeans(n_clusters=k, n_init=1, random_state=random_state).fit(
            points, sample_weight=counts)
    return km.labels_[inverse.reshape(-1)].reshape(h, w)

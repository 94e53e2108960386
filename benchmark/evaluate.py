"""Every metric of a loaded model on a dataset's test split, plus the k-means protocol.

Letters: B batch, T frames, K capsules, H = W image side, F feature size.

Masks and flow are scored on frame 0 of each test pair, the frame whose grid the flow lives on,
against the slots the data's manifest names (each its own target); data whose Table 1 rows are
groups of slots (the articulated figure's whole limbs, `datasets.targets`) is scored on those
groups as well, under the record's "groups", with each group's parts-union score beside it
(`benchmark.parts_union`, under "groups" -> "parts_union").
A method that declares `uses_ground_truth = ("flow",)` gets the test pair's ground-truth flow;
no other method ever sees it. A method that trains nothing (`train` None) is scored on the test
pairs alone: it has no learned features for the k-means protocol.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmark.clustering import classification_metrics
from benchmark.datasets import (TRAIN_FEATURES, read_checked, read_manifest_checked, targets,
                                to_flow, to_images)
from benchmark.errors import BenchmarkError
from benchmark.metrics import AriScore, FlowScore, SegmentationScore
from benchmark.parts_union import MAX_MEMBERS, PartsUnionScore
from benchmark.registry import LoadedModel, Method, Prediction
from trainloop.allocator import release_freed_memory

EVAL_BATCH = 25  # a batch's activations stay small enough to be reused (docs/benchmark.md)
TRIM_EVERY = 20  # batches between handing the heap's free pages back (docs/benchmark.md)
TEST_FIELDS = ("frames", "amodal", "visible", "flow", "present", "label")


def predict(method: Method, model, frames: np.ndarray, flow: np.ndarray | None) -> Prediction:
    """The method's prediction for test pairs: frames (B, T, H, W, 3) uint8, flow (B, H, W, 2)
    of frame 0 -> 1, passed on only to a method that declares it sees it."""
    img0, img1 = to_images(frames[:, 0]), to_images(frames[:, 1])  # (B, 3, H, W)
    if "flow" in method.uses_ground_truth:
        if flow is None:
            raise BenchmarkError(f"{method.name} needs the ground-truth flow of the test pairs")
        return method.predict(model, img0, img1, gt_flow=to_flow(flow))
    return method.predict(model, img0, img1)


def embed(method: Method, model, frames: np.ndarray, flow: np.ndarray | None) -> np.ndarray:
    """The method's features of frame 0 of pairs, with the flow as for `predict`."""
    img0 = to_images(frames[:, 0])  # (B, 3, H, W)
    if "flow" in method.uses_ground_truth:
        if flow is None:
            raise BenchmarkError(f"{method.name} needs the ground-truth flow of the pairs")
        return method.embed(model, img0, gt_flow=to_flow(flow))
    return method.embed(model, img0)


def evaluate(method: Method, loaded: LoadedModel, data_root: Path, random_state: int,
             test_limit: int | None = None, progress: bool = True) -> dict:
    """The metrics dict a record stores (see benchmark.metrics and benchmark.clustering)."""
    test = read_checked(data_root, "test", TEST_FIELDS, test_limit)
    n, size = len(test["label"]), test["frames"].shape[2]
    if n == 0:
        raise BenchmarkError(f"{data_root} has an empty test split")
    if loaded.image_size != size:
        raise BenchmarkError(f"the checkpoint expects {loaded.image_size} px images but "
                             f"{data_root} holds {size} px; pass matching --data")
    slots, groups = targets(read_manifest_checked(data_root))
    unions = bool(groups) and all(len(m) <= MAX_MEMBERS for m in groups.values())
    seg = grouped = union = None
    flow, ari = FlowScore(), AriScore()
    test_feats = []
    bar = tqdm(range(0, n, EVAL_BATCH), desc="evaluate test", unit="batch", disable=not progress)
    for i in bar:
        j = min(i + EVAL_BATCH, n)
        gt_flow = test["flow"][i:j, 0]  # (B, H, W, 2)
        pred = predict(method, loaded.model, test["frames"][i:j], gt_flow)
        pred.check(j - i, size)
        K = pred.masks.shape[1]
        seg = seg or SegmentationScore(K=K, names=slots)
        vis = test["visible"][i:j, 0]  # (B, H, W)
        seg.update(pred.masks, pred.visible, test["amodal"][i:j, 0], vis, test["present"][i:j])
        if groups:
            grouped = grouped or SegmentationScore(K=K, names=tuple(groups),
                                                   members=tuple(groups.values()))
            grouped.update(pred.masks, pred.visible, test["amodal"][i:j, 0], vis,
                           test["present"][i:j])
            if unions:
                union = union or PartsUnionScore(K=K, names=tuple(groups),
                                                 members=tuple(groups.values()))
                union.update(pred.masks, pred.visible, test["amodal"][i:j, 0], vis,
                             test["present"][i:j])
        if pred.flow is not None:
            flow.update(pred.flow, gt_flow, vis)
        ari.update(pred.visible, vis)
        test_feats.append(pred.features)
        if (i // EVAL_BATCH) % TRIM_EVERY == TRIM_EVERY - 1:
            release_freed_memory()
    out = {**seg.compute(), **flow.compute(), **ari.compute()}
    if grouped is not None:
        out["groups"] = grouped.compute()
    if union is not None:
        out["groups"]["parts_union"] = union.compute(out["assignment"],
                                                     out["visible_assignment"], slots)
    out["n_test"] = int(n)
    if method.train is not None:  # a method that trains nothing learned no features (Table 2)
        out.update(_kmeans_protocol(method, loaded, data_root, np.concatenate(test_feats),
                                    test["label"], random_state, progress))
    return out


def _kmeans_protocol(method: Method, loaded: LoadedModel, data_root: Path,
                     test_feats: np.ndarray, test_labels: np.ndarray, random_state: int,
                     progress: bool) -> dict:
    """Table 2's k-means accuracies: fit on the features of the first TRAIN_FEATURES training
    pairs, scored on the test features (benchmark.clustering)."""
    fields = ("frames", "label") + (("flow",) if "flow" in method.uses_ground_truth else ())
    train = read_checked(data_root, "train", fields, TRAIN_FEATURES)
    train_flow = train.get("flow")
    train_feats = [embed(method, loaded.model, train["frames"][i:i + EVAL_BATCH],
                         None if train_flow is None else train_flow[i:i + EVAL_BATCH, 0])
                   for i in tqdm(range(0, len(train["label"]), EVAL_BATCH), desc="embed train",
                                 unit="batch", disable=not progress)]
    out = classification_metrics(np.concatenate(train_feats), train["label"], test_feats,
                                 test_labels, random_state,
                                 standardised=method.standardise_features)
    out["n_train_features"] = int(len(train["label"]))
    return out

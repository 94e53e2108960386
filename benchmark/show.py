"""`flowbench show`: the qualitative figure of a record's checkpoint or of a checkpoint.

Letters: B pairs, T frames, H = W image side.

The test pairs come from, in order: the folder passed with --data; the record's own data folder
when it is on this machine and unchanged (same manifest hash); the profile's folder for a
checkpoint; else a small set of the same first test pairs made here (datasets.show_data), so
a fresh clone can draw every committed record.
Each pair is drawn beside its ground truth (the slots its manifest names), with its IoU under
the fixed assignment: a record's (chosen over its whole test split), or for a checkpoint one
chosen on the pairs drawn. Two kinds (`KINDS`): "pairs", every map of each pair
(benchmark.figures), and "parts", each capsule's mask on the parts (benchmark.parts_figure).
"""
from __future__ import annotations

from pathlib import Path

from benchmark import datasets, records
from benchmark.errors import BenchmarkError
from benchmark.profiles import DATA_SEED, default_data_root
from benchmark.registry import get_method

KINDS = ("pairs", "parts")

def _checkpoint_of(source: Path, rec: dict) -> Path:
    ckpt = rec.get("checkpoint")
    if not ckpt:
        raise BenchmarkError(f"{source} names no checkpoint")
    path = Path(ckpt)
    if not path.is_file():
        note = rec.get("checkpoint_note")
        raise BenchmarkError(f"{source}: its checkpoint {ckpt} is not on this machine"
                             + (f" ({note})" if note else ""))
    want = rec.get("checkpoint_sha256")
    if want and records.file_sha256(path) != want:
        raise BenchmarkError(f"{source}: {ckpt} is not the checkpoint it names (sha256 differs)")
    return path


def _record_data(rec: dict, need: int, echo) -> Path:
    from geogen.errors import GeogenError
    from geogen.shards import manifest_hash
    data = rec.get("data") or {}
    root = Path(data.get("root") or "")
    if data.get("root") and (root / "manifest.json").is_file():
        try:
            if manifest_hash(root) == data.get("manifest_hash"):
                return root
        except (GeogenError, OSError, ValueError):  # unreadable: as good as no folder here
            pass
    size = int((data.get("profile") or {}).get("size") or 0)
    ss = data.get("supersample")
    if not size or not ss:
        raise BenchmarkError("the record does not say its image size and subsample count; "
                             "pass --data")
    from benchmark.records import record_look
    return datasets.show_data(rec["dataset"], size, need, int(ss),
                              int(data.get("data_seed", DATA_SEED)), echo=echo,
                              look=record_look(rec))


def _profile_data(dataset: str, size: int, need: int, echo) -> Path:
    """The quick profile's folder when it is here at the checkpoint's image size, else the
    first test pairs of the current data made here."""
    root = default_data_root(dataset, "quick")
    if (root / "manifest.json").is_file():
        if int(datasets.read_manifest_checked(root).get("size", -1)) == size:
            return root
    return datasets.show_data(dataset, size, need, datasets.current_supersample(), echo=echo)


def show(source: Path, output: Path, *, method_name: str, dataset: str, data: Path | None,
         pairs: int, start: int, kind: str = "pairs", echo=print) -> Path:
    """Draw `pairs` test pairs from `start` as figure `kind` and write the image (its type the
    extension's); returns its path."""
    from benchmark.figures import Assignment, qualitative_figure, save_image
    from benchmark.parts_figure import parts_figure
    from geogen.outpath import check_output_file
    from geogen.schema import slots_of
    from geogen.sheet import image_format
    if kind not in KINDS:
        raise BenchmarkError(f"unknown figure kind {kind!r}; choose from {', '.join(KINDS)}")
    check_output_file(output, "-o")  # before any model is loaded or data made
    image_format(output)  # an unknown extension is refused before any work
    if not source.is_file():
        raise BenchmarkError(f"{source} does not exist")
    if data is not None and not (Path(data) / "manifest.json").is_file():
        raise BenchmarkError(f"data folder {data} does not exist (or has no manifest.json)")
    need = start + pairs
    metrics = None  # a record's; a checkpoint's assignment is chosen on the pairs drawn
    if source.suffix == ".json":
        rec = records.read_record(source)
        method, checkpoint = get_method(rec["method"]), _checkpoint_of(source, rec)
        loaded = method.load(checkpoint)
        root = data or _record_data(rec, need, echo)
        metrics = rec["metrics"] if (rec["metrics"] or {}).get("visible_assignment") else None
    else:
        method, checkpoint = get_method(method_name), source
        loaded = method.load(checkpoint)
        root = data or _profile_data(dataset, loaded.image_size, need, echo)
    slots = slots_of(datasets.read_manifest_checked(root))
    assignment = None if metrics is None else Assignment.of(
        metrics, f"the record's, over {metrics.get('n_test')} test pairs", slots)
    test = datasets.read_checked(root, "test", ("frames", "flow", "amodal", "visible", "present"),
                                 need)
    test = {k: v[start:] for k, v in test.items()}
    frames, flows = test["frames"], test["flow"][:, 0]  # (B, T, H, W, 3), (B, H, W, 2)
    if len(frames) == 0:
        raise BenchmarkError(f"{root} has fewer than {start + 1} test pairs")
    if frames.shape[2] != loaded.image_size:
        raise BenchmarkError(f"the checkpoint expects {loaded.image_size} px but {root} holds "
                             f"{frames.shape[2]} px")
    title = (f"{method.title}: {checkpoint.name} on {root} test "
             f"{start}-{start + len(frames) - 1}")
    if kind == "parts":
        figure = parts_figure(method, loaded.model, frames, flows, title, test, slots,
                              assignment=assignment, first=start)
    else:
        figure = qualitative_figure(method, loaded.model, frames, flows, title, test=test,
                                    assignment=assignment, first=start, slots=slots)
    return save_image(figure, output)

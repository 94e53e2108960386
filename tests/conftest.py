"""Shared fixtures: one tiny generated Geo set for the tests that need real shards."""
import pytest

TINY_SIZE = 32


@pytest.fixture(scope="session")
def tiny_geo(tmp_path_factory):
    """Geo at 32 px: 48 train, 4 val, 16 test pairs (seconds to make, shared by the session)."""
    from geogen.make import MakeConfig, make_dataset
    out = tmp_path_factory.mktemp("geo") / "geo"
    cfg = MakeConfig(variant="geo", n=48, val=4, test=16, size=TINY_SIZE, seed=0, out=str(out),
                     workers=1, shard_size=1000)
    return make_dataset(cfg, progress=False)


class ToyMethod:
    """A method with no model: what the benchmark needs to see a new baseline end to end.

    Its "checkpoint" is a JSON file; it predicts flat masks, the ground-truth flow when it is
    given one (None otherwise), each image's mean colour as features and one extra map.
    """

    name = "toy"
    title = "Toy method"
    budgets = {"smoke": "seconds", "quick": "about a minute"}

    def __init__(self):
        self.gt_seen = []  # per predict call: whether gt_flow came

    def config(self, spec):
        return {"seed": spec.seed, "size": spec.image_size}

    def train(self, spec):
        import json
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        (spec.run_dir / "log.csv").write_text("step,loss\n1,0.5\n")
        ckpt = spec.run_dir / "model.json"
        ckpt.write_text(json.dumps({"size": spec.image_size, "data_root": str(spec.data_root),
                                    "extra_data": {k: str(v) for k, v in spec.extra_data.items()}}))
        return ckpt

    def load(self, checkpoint):
        import json
        from pathlib import Path

        from benchmark.errors import BenchmarkError
        from benchmark.registry import Axes, LoadedModel
        if not Path(checkpoint).is_file():
            raise BenchmarkError(f"checkpoint {checkpoint} does not exist")
        try:
            cfg = json.loads(Path(checkpoint).read_text())
            size = int(cfg["size"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            raise BenchmarkError(f"{checkpoint} is not a toy checkpoint") from None
        return LoadedModel(model=cfg, config=cfg, axes=Axes(), image_size=size)

    def predict(self, model, img0, img1, *, gt_flow=None):
        import numpy as np

        from benchmark.registry import Prediction
        self.gt_seen.append(gt_flow is not None)
        b, _, h, w = img0.shape
        return Prediction(masks=np.full((b, 3, h, w), 0.5, np.float32),
                          visible=np.full((b, 3, h, w), 1 / 3, np.float32),
                          flow=gt_flow, features=self.embed(model, img0),
                          extras={"brightness": img0.mean(1, keepdims=True)})

    def embed(self, model, img0, *, gt_flow=None):
        return img0.mean((2, 3))  # (B, 3)


@pytest.fixture
def register_toy():
    """register_toy(**attributes) registers a ToyMethod subclass for one test."""
    from benchmark.registry import register, unregister
    names = []

    def make(**attrs):
        cls = register(type("Toy", (ToyMethod,), attrs))
        names.append(cls.name)
        from benchmark.registry import METHODS
        return METHODS[cls.name]

    yield make
    for name in names:
        unregister(name)


@pytest.fixture
def in_repo(monkeypatch):
    """Run from the repository root, where committed records name their files."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    return root

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

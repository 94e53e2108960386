"""The README's set-up lines are true: how to get a CUDA build of torch for the gpu profile, and
what `--device auto` picks."""
import re
from pathlib import Path

import torch

from trainloop.device import resolve_device

REPO = Path(__file__).resolve().parents[1]


def test_the_readme_says_how_to_get_a_cuda_torch_and_what_auto_picks(monkeypatch):
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    flat = " ".join(readme.split())
    assert "for the `gpu` profile a CUDA build, see `docs/benchmark.md`, \"On a GPU\"" in flat
    assert "`--device auto` takes cuda when torch sees a GPU" in flat
    # the section it points at gives the command, for the torch the Makefile pins
    docs = (REPO / "docs" / "benchmark.md").read_text()
    section = docs.split("### On a GPU\n", 1)[1].split("\n#", 1)[0]
    pin = re.search(r"torch==([\d.]+)", (REPO / "Makefile").read_text()).group(1)
    assert f"pip install --force-reinstall torch=={pin} --index-url " \
           f"https://download.pytorch.org/whl/cu" in section
    assert "torch.cuda.is_available()" in section
    # and auto is what both say
    for available, picked in ((True, "cuda"), (False, "cpu")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda a=available: a)
        assert resolve_device("auto").type == picked

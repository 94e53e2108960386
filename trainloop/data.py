"""What names the data a run trains on, so that a run resumes only on the data it started on.

A method that reads a geogen dataset puts `data_meta(root)` into the meta it passes to `fit`; the
resume rule compares the manifest hashes. In-memory data names none and is not compared.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from trainloop.errors import LoopError

# The meta keys: the folder(s), the manifests' sha256, the variants they hold.
DATA, DATA_HASH, DATA_VARIANT = "data", "data_hash", "data_variant"


def data_meta(*roots: str | Path) -> dict[str, Any]:
    """{DATA: the folders, DATA_HASH: their manifests' sha256} (several joined by "+", in order:
    a run's main data, then the data mixed in), DATA_VARIANT: their variants, a list (a variant's
    name may hold a "+"). The hash is
    the manifest file's sha256, as geogen's `manifest_hash` gives it (the loop imports no data
    package: the trainers read and check their folders before they get here)."""
    hashes, variants = [], []
    for root in roots:
        try:
            text = (Path(root) / "manifest.json").read_bytes()
        except OSError as err:
            raise LoopError(f"{root}: cannot read its manifest.json ({err.strerror or err})") from None
        hashes.append(hashlib.sha256(text).hexdigest())
        try:
            variants.append(str(json.loads(text).get("variant", "")))
        except (ValueError, AttributeError):
            variants.append("")
    return {DATA: "+".join(str(r) for r in roots), DATA_HASH: "+".join(hashes),
            DATA_VARIANT: variants}


def check_same_data(run: Path, saved: dict[str, Any], current: dict[str, Any]) -> None:
    """LoopError naming both datasets when the saved meta and the current one name different
    manifests."""
    old, new = saved.get(DATA_HASH), current.get(DATA_HASH)
    if old and new and old != new:
        raise LoopError(f"{run} was trained on other data: {saved.get(DATA)} (manifest "
                        f"{_short(old)}), not {current.get(DATA)} (manifest {_short(new)}); use "
                        f"a new output folder, or --force to train afresh")


def _short(digests: str) -> str:
    return "+".join(d[:12] for d in digests.split("+"))

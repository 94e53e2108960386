"""`geogen merge OUT`: the manifest of a dataset made in parts (`geogen make --part I/N`, see
geogen.parts), written once every part is there and every shard is whole and unchanged."""
from __future__ import annotations

import json
from pathlib import Path

from geogen import parts, shards
from geogen.errors import GeogenError
from geogen.make import (RUN_RECORD, MakeConfig, _plan, _shard_file, build_manifest, run_head,
                         validate)


def merge_dataset(root: str | Path) -> Path:
    """Check the parts of OUT and write its manifest (the one a one-part run writes); the part
    markers are removed after it. A GeogenError (one line) for anything missing or changed."""
    root = Path(root)
    record = root / RUN_RECORD
    if not record.is_file():
        raise GeogenError(f"{root}: no {RUN_RECORD}, not a folder that geogen make --part wrote")
    if (root / shards.MANIFEST).is_file():
        raise GeogenError(f"{root}: already holds a finished dataset ({shards.MANIFEST}); "
                          f"nothing to merge")
    try:
        content = json.loads(record.read_text())
        config = MakeConfig(**content, out=str(root))
    except (OSError, ValueError, TypeError):
        raise GeogenError(f"{record}: unreadable; make the parts again") from None
    validate(config)
    plan = _plan(config)
    recorded, sources = parts.read_markers(root, config.content(), plan)
    head = run_head(config)
    for split, k, first, count in plan:
        path = _shard_file(root, split, k)
        problem = shards.shard_problem(path, shards.shard_attrs(head, split, first, count),
                                       recorded[(split, k)])
        if problem == "missing":
            raise GeogenError(f"{path}: missing, though its part finished; make that part "
                              f"again")
        if problem:
            raise GeogenError(f"{path}: changed since its part finished: {problem}; make "
                              f"that part again")
    shards.write_json_atomic(root / shards.MANIFEST, build_manifest(config, plan, recorded,
                                                                    sources))
    parts.clear_markers(root)
    return root

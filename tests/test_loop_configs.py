"""Every method's config holds the shared loop's settings in one `loop` field (a LoopConfig),
declared nowhere else; configs stored in the older flat form (the committed checkpoints, the
records) still load, their loop settings landing in `loop`, and a run resumed from such a
checkpoint compares configs in today's form."""
import dataclasses
import json
import typing
from pathlib import Path

import pytest
import torch

import trainloop
from baselines.gwm import checkpoint as gwm_ckpt
from baselines.gwm.config import TrainConfig as GwmConfig
from baselines.motiongrouping import checkpoint as mg_ckpt
from baselines.motiongrouping.config import TrainConfig as MgConfig
from baselines.psd import checkpoint as psd_ckpt
from baselines.psd.config import TrainConfig as PsdConfig
from baselines.rnem import checkpoint as rnem_ckpt
from baselines.rnem.config import TrainConfig as RnemConfig
from baselines.scae import checkpoint as scae_ckpt
from baselines.scae.config import SCAEConfig
from flowcaps import FlowCapsules, FlowcapsError, ModelConfig, TrainConfig, checkpoint
from flowcaps.trainer import FlowcapsTask
from trainloop.configs import LOOP_FIELDS
from trainloop.loop import LoopConfig

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"flowcaps": TrainConfig, "psd": PsdConfig, "rnem": RnemConfig, "scae": SCAEConfig,
           "flowscae": SCAEConfig, "motiongrouping": MgConfig, "gwm": GwmConfig}
STORES = {"flowcaps": checkpoint, "psd": psd_ckpt, "rnem": rnem_ckpt, "scae": scae_ckpt,
          "flowscae": scae_ckpt, "motiongrouping": mg_ckpt, "gwm": gwm_ckpt}
# What each method's older configs called a loop setting that the loop names otherwise.
RENAMED = {"flowcaps": {"pairs": "rows"}, "rnem": {"max_steps": "steps"},
           "scae": {"max_steps": "steps"}, "flowscae": {"max_steps": "steps"}}


def _groups(cls):
    """`cls` and every config dataclass it holds but the loop's."""
    yield cls
    for tp in typing.get_type_hints(cls).values():
        if dataclasses.is_dataclass(tp) and tp is not LoopConfig:
            yield from _groups(tp)


@pytest.mark.parametrize("cls", sorted(set(CONFIGS.values()), key=lambda c: c.__module__),
                         ids=lambda c: c.__module__)
def test_no_method_config_redeclares_a_loop_field(cls):
    assert isinstance(cls().loop, LoopConfig)
    for group in _groups(cls):
        again = {f.name for f in dataclasses.fields(group)} & LOOP_FIELDS
        assert not again, f"{group.__module__}.{group.__name__} re-declares {sorted(again)}"


def _method(path: Path) -> str:
    return path.name.split("_")[0]


CHECKPOINTS = sorted((ROOT / "checkpoints").glob("*.pt"))


@pytest.mark.parametrize("path", CHECKPOINTS, ids=lambda p: p.name)
def test_a_committed_checkpoint_in_the_flat_form_loads_with_its_values_in_loop(path):
    """Each committed checkpoint loads; one saved before the loop had its field (the flat form)
    has its loop settings moved into `loop` with their values."""
    method = _method(path)
    store = STORES[method]
    blob = store.read(path)
    raw = json.loads(blob["config"])
    cfg = store.config_of(blob)
    if "loop" in raw:  # trained since: today's form, as it was saved
        assert dataclasses.asdict(cfg.loop) == {**dataclasses.asdict(cfg.loop), **raw["loop"]}
        assert store.load(path) is not None and type(cfg).from_json(cfg.to_json()) == cfg
        return
    flat = raw["run"] if method in ("scae", "flowscae") else raw
    loop = dataclasses.asdict(cfg.loop)
    for old, value in flat.items():
        name = RENAMED.get(method, {}).get(old, old)
        if name in LOOP_FIELDS:
            want = {None: 0}.get(value, value) if name == "threads" else value
            if method in ("scae", "flowscae") and name == "max_minutes":
                want = value or None  # SCAE's 0 was no guard
            assert loop[name] == want, (name, value, loop[name])
    # the model it describes is the one its weights fit, and it round-trips in today's form
    assert store.load(path) is not None
    assert type(cfg).from_json(cfg.to_json()) == cfg


def test_a_flat_config_loads_as_its_nested_form_for_every_method():
    for method, cls in CONFIGS.items():
        cfg = cls().replace(loop={"seed": 7, "out": "runs/old", "batch_size": 6})
        raw = json.loads(cfg.to_json())
        loop = raw.pop("loop")
        back = {v: k for k, v in RENAMED.get(method, {}).items()}
        flat = {back.get(k, k): v for k, v in loop.items()}
        old = {**raw, "run": flat} if cls is SCAEConfig else {**raw, **flat}
        assert cls.from_json(json.dumps(old)) == cfg, method


def _record_configs():
    for path in sorted((ROOT / "results" / "records").rglob("*.json")):
        rec = json.loads(path.read_text())
        config = rec.get("config")
        method = {"flowcaps-refine": "flowcaps"}.get(rec.get("method"), rec.get("method"))
        if not isinstance(config, dict) or method not in CONFIGS:
            continue
        for part in (config.get("train"), (config.get("trained_with") or {}).get("config")):
            if part is not None:
                yield path.relative_to(ROOT).as_posix(), method, part


RECORD_CONFIGS = list(_record_configs())


def test_every_committed_records_config_loads():
    assert len(RECORD_CONFIGS) > 50
    for name, method, part in RECORD_CONFIGS:
        text = part if isinstance(part, str) else json.dumps(part)
        cfg = CONFIGS[method].from_json(text)
        assert isinstance(cfg.loop, LoopConfig), name


def _tiny() -> TrainConfig:
    model = ModelConfig(image_size=16, enc_channels=(4,), enc_hidden=8, dec_hidden=8,
                        num_capsules=2, capsule_dim=6)
    return TrainConfig().replace(model=model, out="run", seed=2, pairs=64, device="cpu")


def _old_form(cfg: TrainConfig) -> str:
    """`cfg` as configs were stored before the loop had its field: flat, `pairs` for rows."""
    raw = json.loads(cfg.to_json())
    loop = raw.pop("loop")
    raw.update({k: loop[k] for k in ("out", "seed", "batch_size", "epochs", "max_minutes",
                                     "device", "threads", "grad_clip", "explode_factor",
                                     "log_every", "checkpoint_minutes")}, pairs=loop["rows"])
    return json.dumps(raw, sort_keys=True)


def test_a_run_resumes_from_an_old_form_checkpoint_comparing_the_mapped_configs(tmp_path):
    cfg = _tiny().replace(out=str(tmp_path))
    path = trainloop.checkpoint.write_blob(tmp_path / "checkpoint.pt", checkpoint.FORMAT,
                                           _old_form(cfg), FlowCapsules(cfg.model),
                                           progress={"step": 1})
    assert "loop" not in json.loads(torch.load(path, weights_only=True)["config"])
    trainloop.check_resume(FlowcapsTask(cfg), path)  # the same settings: it resumes
    # a longer budget and another folder may change; another seed or rate may not
    trainloop.check_resume(FlowcapsTask(cfg.replace(pairs=128, out="elsewhere")), path)
    with pytest.raises(trainloop.LoopError, match=r"fields \['loop.seed', 'lr'\]"):
        trainloop.check_resume(FlowcapsTask(cfg.replace(seed=3, lr=0.5)), path)


def test_set_names_a_loop_field_alone_or_under_loop():
    from flowcaps.cli import parse_set
    assert parse_set(("seed=1", "loop.epochs=3", "pairs=null", "out=123", "lr=0.5")) == {
        "loop": {"seed": 1, "epochs": 3, "rows": None, "out": "123"}, "lr": 0.5}
    cfg = TrainConfig().replace(**parse_set(("seed=1", "loop.log_every=3")))
    assert (cfg.loop.seed, cfg.loop.log_every) == (1, 3)
    with pytest.raises(FlowcapsError, match="loop.seed must be an integer"):
        TrainConfig().replace(**parse_set(("loop.seed=x",)))

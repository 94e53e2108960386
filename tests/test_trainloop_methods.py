"""The shared loop's promises, checked once for every method that trains through it: a resumed
run ends where an uninterrupted one does, a non-finite loss stops with the last good checkpoint
kept, and the one resume rule (runtime, folder and budget may change, nothing else).

Each method's tiny run comes from its adapter (`loop_case`, benchmark.registry), so a method
registered with one is checked here with no new test code (tests/test_toy_method.py proves it).
"""
import json
import shutil

import pytest
import torch

import trainloop
from benchmark.registry import get_method, load_methods


def loop_methods() -> list[str]:
    """The registered methods with a loop case, by name."""
    return sorted(name for name, m in load_methods().items() if m.loop_case is not None)


def _blob(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def _fail_at(monkeypatch, task: type, call: int, how: str) -> None:
    """The task's step raises KeyboardInterrupt ("interrupt"), or returns a NaN total ("nan"),
    on its `call`-th call (1-based)."""
    real, calls = task.step, {"n": 0}

    def step(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == call and how == "interrupt":
            raise KeyboardInterrupt
        total, terms = real(self, *args, **kwargs)
        return (total * float("nan") if calls["n"] == call else total), terms

    monkeypatch.setattr(task, "step", step)


@pytest.mark.parametrize("name", loop_methods())
def test_an_interrupted_run_resumes_to_the_same_weights(name, tmp_path, monkeypatch):
    case = get_method(name).loop_case()
    straight = case.fit(case.config(tmp_path / "a", 8))
    with monkeypatch.context() as m:
        _fail_at(m, case.task, 6, "interrupt")  # during step 5 (0-based): after PSD's switch
        with pytest.raises(case.error, match="interrupted at step 5; resume with the same command"):
            case.fit(case.config(tmp_path / "b", 8))
    assert json.loads(_blob(tmp_path / "b" / "checkpoint.pt")["progress"])["step"] == 5
    assert not (tmp_path / "b" / "model.pt").exists()
    resumed = case.fit(case.config(tmp_path / "b", 8))
    a, b = _blob(straight)["model"], _blob(resumed)["model"]
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert json.loads(_blob(resumed)["meta"])["step"] == 8
    rows = (tmp_path / "b" / "log.csv").read_text().splitlines()
    assert rows[0].startswith("step,epoch,") and [int(r.split(",")[0]) for r in rows[1:]] == \
        list(range(1, 9))  # one header; steps 1-5, then 6-8 after the resume


@pytest.mark.parametrize("name", loop_methods())
def test_a_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(name, tmp_path, monkeypatch):
    case = get_method(name).loop_case()
    _fail_at(monkeypatch, case.task, 3, "nan")
    with pytest.raises(case.error, match="loss not finite at step 2; stopped, last good "
                                         "checkpoint kept at"):
        case.fit(case.config(tmp_path, 8))
    kept = _blob(tmp_path / "checkpoint.pt")
    assert json.loads(kept["progress"])["step"] == 2  # saved after each good step
    assert all(torch.isfinite(v).all() for v in kept["model"].values() if v.is_floating_point())
    assert not (tmp_path / "model.pt").exists()


@pytest.mark.parametrize("name", loop_methods())
def test_one_resume_rule_for_every_method(name, tmp_path):
    """Another setting is refused, naming it; the folder moved elsewhere, with a longer budget,
    resumes and trains on to the new budget."""
    case = get_method(name).loop_case()
    case.fit(case.config(tmp_path / "run", 4))
    with pytest.raises(case.error, match=rf"different config \(fields \['{case.field}'\]\)"):
        case.fit(case.changed(case.config(tmp_path / "run", 4)))
    shutil.move(tmp_path / "run", tmp_path / "moved")
    longer = case.config(tmp_path / "moved", 8)
    path = case.fit(longer)
    assert json.loads(_blob(path)["meta"])["step"] == 8


@pytest.mark.parametrize("name", loop_methods())
def test_a_run_resumes_only_on_the_data_it_started_on(name, tmp_path):
    """The data's manifest hash is compared as the config is: a run folder trained on one
    dataset refuses another, naming both; the same data resumes."""
    case = get_method(name).loop_case()
    first = {trainloop.DATA: "data/a", trainloop.DATA_HASH: "a" * 64}
    case.fit(case.config(tmp_path / "run", 4), meta=first)
    other = {trainloop.DATA: "data/b", trainloop.DATA_HASH: "b" * 64}
    with pytest.raises(case.error, match=r"trained on other data: data/a \(manifest a{12}\), "
                                         r"not data/b \(manifest b{12}\).*--force"):
        case.fit(case.config(tmp_path / "run", 8), meta=other)
    path = case.fit(case.config(tmp_path / "run", 8), meta=first)
    assert json.loads(_blob(path)["meta"])[trainloop.DATA_HASH] == "a" * 64

import numpy as np
import pytest

from geogen import schema


def test_class_of_draw_matches_psd_pattern():
    classes = [schema.class_of_draw(d) for d in range(10)]
    assert classes == [0, 1, 1, 2, 2, 3, 3, 3, 3, 3]
    # The class prior is the frequency of each class over the ten draws.
    freq = np.bincount(classes, minlength=4) / 10
    assert np.allclose(freq, schema.CLASS_PRIOR)
    for c, pattern in enumerate(schema.CLASS_PRESENCE):
        assert pattern[0], "the circle is always present"
        assert schema.CLASSES[c].count("+") + 1 == sum(pattern)


def _sample(T=2, H=32, S=schema.S):
    return {name: np.zeros(f.shape(T, H, S), f.dtype)
            for name, f in schema.FIELDS.items() if f.required}


def test_check_sample_accepts_contract_and_rejects_drift():
    schema.check_sample(_sample(), frames=2, size=32)
    bad = _sample()
    bad["flow"] = bad["flow"].astype(np.float64)
    with pytest.raises(ValueError, match="flow"):
        schema.check_sample(bad, frames=2, size=32)
    bad = _sample()
    del bad["visible"]
    with pytest.raises(ValueError, match="visible"):
        schema.check_sample(bad, frames=2, size=32)
    bad = _sample()
    bad["amodal"] = np.zeros((2, 3, 32, 31), bool)
    with pytest.raises(ValueError, match="amodal"):
        schema.check_sample(bad, frames=2, size=32)
    # The slot count is the data's: ten parts pass with slots=10 and fail against Geo's three.
    schema.check_sample(_sample(S=10), frames=2, size=32, slots=10)
    with pytest.raises(ValueError, match="amodal"):
        schema.check_sample(_sample(S=10), frames=2, size=32)


def test_slots_and_classes_come_from_the_manifest():
    assert schema.slots_of({}) == schema.SLOTS and schema.classes_of({}) == schema.CLASSES
    assert schema.slots_of({"slots": ["torso", "head"]}) == ("torso", "head")


def test_value_problem_names_the_first_bad_row_of_each_kind():
    geo = schema.bounds_of({"variant": "geo"})
    parts = schema.bounds_of({"variant": "articulated", "slots": list("abcd"),
                              "classes": ["figure"],
                              "sources": {"backgrounds": {"count": 5}, "textures": {"count": 2}}})
    assert schema.value_problem("label", np.array([0, 3, 4]), geo, row0=10) == (
        "holds 4, outside 0..3 (the folder's classes) at sample 12")
    assert schema.value_problem("label", np.array([0, 0]), parts) is None
    assert "holds 1, outside 0..0" in schema.value_problem("label", np.array([0, 1]), parts)
    assert schema.value_problem("depth", np.array([[3, 1, 0, 2]], np.uint8), parts) is None
    assert "holds [0, 1, 1, 2] for its slots" in schema.value_problem(
        "depth", np.array([[3, 1, 0, 2], [0, 1, 1, 2]], np.uint8), parts)
    assert schema.value_problem("tex_source", np.array([[-1, 0, 1, 1]]), parts) is None
    assert "holds 2, outside -1..1" in schema.value_problem("tex_source",
                                                            np.array([[-1, 2, 1, 1]]), parts)
    assert "holds 5, outside 0..4" in schema.value_problem("bg_source", np.array([5]), parts)
    joint = np.zeros((2, 3, 4), np.float32)
    joint[1, 2, 0] = np.nan
    assert schema.value_problem("joint_angle", joint, parts) == "holds nan at sample 1"
    assert schema.value_problem("frames", np.full((1, 2, 4, 4, 3), 255, np.uint8), geo) is None
    assert schema.value_problem("flow", np.zeros((0, 1, 4, 4, 2), np.float32), geo) is None


def test_manifest_problems_name_the_variant_slots_and_classes():
    assert schema.manifest_problems({"variant": "geo"}) == []
    assert schema.manifest_problems({"variant": "psd"}) == []
    assert "names variant 'mnist'" in schema.manifest_problems({"variant": "mnist"})[0]
    assert "malformed slots" in schema.manifest_problems({"variant": "geo", "slots": "abc"})[0]
    assert schema.manifest_problems([1, 2]) == ["is not a JSON object (list)"]

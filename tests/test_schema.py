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

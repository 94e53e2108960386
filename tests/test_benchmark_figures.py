import numpy as np

from benchmark import figures
from benchmark.registry import Prediction


def test_backward_warp_undoes_a_known_translation():
    rng = np.random.default_rng(0)
    img0 = rng.random((3, 8, 8))
    # The scene moves 2 px right (+x) and 1 px down (+y) from I to I'; flow is (2, 1).
    img1 = np.zeros_like(img0)
    img1[:, 1:, 2:] = img0[:, :-1, :-2]
    flow = np.zeros((2, 8, 8))
    flow[0], flow[1] = 2.0, 1.0
    warped = figures.warp_backward(img1, flow)
    assert np.allclose(warped[:, :-1, :-2], img0[:, :-1, :-2])


def test_flow_colours_are_geogens_wheel():
    """One wheel for the project: zero flow white, direction as hue, as `geogen show` draws."""
    flow = np.zeros((2, 1, 3))
    flow[0, 0, 1] = 4.0  # +x
    flow[0, 0, 2] = -4.0  # -x
    rgb = figures.flow_to_rgb(flow, 4.0, 0)
    assert rgb[0, 0].tolist() == [255, 255, 255]
    assert rgb[0, 1].tolist() == [255, 0, 0]  # hue 0
    assert rgb[0, 2].tolist() == [0, 255, 255]  # opposite hue


def test_pair_rows_and_sheet_layout():
    k, h = 3, 8
    pred = Prediction(masks=np.full((1, k, h, h), 0.5, np.float32),
                      visible=np.full((1, k, h, h), 1 / 3, np.float32),
                      flow=np.zeros((1, 2, h, h), np.float32),
                      features=np.zeros((1, 5), np.float32))
    img = np.zeros((3, h, h))
    rows = figures.pair_rows(img, img, np.zeros((2, h, h)), pred, 0)
    assert [label for label, _ in rows[0]] == [
        "I", "I'", "gt flow (max 0.0px)", "predicted flow", "I' warped to I", "flow key"]
    assert len(rows[1]) == len(rows[2]) == k
    sheet = figures.compose(rows, "title")
    assert sheet.size == (6 * (figures.TILE + figures.PAD) + figures.PAD,
                          3 * (figures.TILE + figures.LABEL_H + figures.PAD)
                          + figures.LABEL_H + 2 * figures.PAD)


def test_a_methods_extras_are_drawn_as_extra_rows_and_checked():
    import pytest

    from benchmark.errors import BenchmarkError
    k, h = 2, 8
    extras = {"motion": np.full((1, 3, h, h), 0.25, np.float32),
              "gamma": np.zeros((1, 1, h, h), np.float32)}
    pred = Prediction(masks=np.zeros((1, k, h, h), np.float32),
                      visible=np.full((1, k, h, h), 0.5, np.float32), flow=None,
                      features=np.zeros((1, 4), np.float32), extras=extras)
    pred.check(1, h)
    rows = figures.pair_rows(np.zeros((3, h, h)), np.zeros((3, h, h)), None, pred, 0)
    assert [[label for label, _ in r] for r in rows[3:]] == [["gamma 0"],
                                                            ["motion 0", "motion 1", "motion 2"]]
    bad = Prediction(pred.masks, pred.visible, None, pred.features,
                     extras={"motion": np.full((1, 3, h, h), 2.0, np.float32)})
    with pytest.raises(BenchmarkError, match=r"extras\['motion'\] must hold values in \[0, 1\]"):
        bad.check(1, h)


def test_a_prediction_off_its_contract_is_refused_naming_the_array():
    import pytest

    from benchmark.errors import BenchmarkError
    ok = dict(masks=np.zeros((2, 3, 8, 8), np.float32), visible=np.zeros((2, 3, 8, 8), np.float32),
              flow=np.zeros((2, 2, 8, 8), np.float32), features=np.zeros((2, 5), np.float32))
    Prediction(**ok).check(2, 8)
    nan = np.zeros((2, 5), np.float32)
    nan[0, 0] = np.nan
    for change, message in [({"masks": np.zeros((2, 3, 8, 4), np.float32)}, "masks must be"),
                            ({"visible": np.zeros((2, 2, 8, 8), np.float32)}, "visible"),
                            ({"flow": np.zeros((2, 8, 8, 2), np.float32)}, "flow must be"),
                            ({"features": np.zeros((3, 5), np.float32)}, "features must be"),
                            ({"features": nan}, "NaN")]:
        with pytest.raises(BenchmarkError, match=message):
            Prediction(**{**ok, **change}).check(2, 8)

import numpy as np
import pytest
from PIL import Image

from benchmark import figures
from benchmark.errors import BenchmarkError
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


def _truth_case():
    """One 8 x 8 pair: capsule 2 draws the circle exactly, capsule 0 half the square, the
    triangle is absent; the fixed assignment gives circle 2, square 0."""
    h = 8
    amodal = np.zeros((3, h, h), bool)
    amodal[0, :4, :4] = True  # circle
    amodal[1, 4:, 4:] = True  # square
    visible = np.zeros((h, h), np.uint8)
    visible[amodal[0]], visible[amodal[1]] = 1, 2
    masks = np.zeros((1, 3, h, h), np.float32)
    masks[0, 2, :4, :4] = 1.0
    masks[0, 0, 4:, 4:6] = 1.0  # 8 of the square's 16 pixels
    pred = Prediction(masks=masks, visible=masks.copy(), flow=None,
                      features=np.zeros((1, 2), np.float32))
    assignment = figures.Assignment((2, 0, 1), (2, 0, 1), "the record's, over 10000 test pairs")
    truth = figures.Truth(amodal, visible, np.array([True, True, False]), assignment)
    return pred, truth


def test_mask_rows_show_the_ground_truth_and_each_capsules_assigned_shape():
    pred, truth = _truth_case()
    img = np.zeros((3, 8, 8))
    rows = figures.pair_rows(img, img, None, pred, 0, truth)
    assert [label for label, _ in rows[1]] == [
        "gt circle", "gt square", "triangle: absent", "mask 0 = square", "mask 1 = triangle",
        "mask 2 = circle"]
    assert [label for label, _ in rows[2]][:4] == [
        "gt visible circle", "gt visible square", "triangle: absent", "visible 0 = square"]
    assert np.asarray(rows[1][0][1]).max() == 255 and np.asarray(rows[1][2][1]).max() == 0
    # the pair's IoU: the mean over its present shapes of the assigned capsule's, (1 + 0.5) / 2
    assert figures.pair_iou(pred, 0, truth) == (0.75, 0.75)
    assert truth.assignment.text() == ("capsules by shape (the record's, over 10000 test pairs): "
                                       "circle 2, square 0, triangle 1")


def test_a_figure_titles_each_pair_with_its_iou(register_toy, monkeypatch):
    """Each pair's block starts with a line of text (its IoU), then the tile rows; without a
    given assignment one is chosen on the pairs drawn and the title says so."""
    toy = register_toy()
    pred, truth = _truth_case()
    frames = np.zeros((2, 2, 8, 8, 3), np.uint8)
    test = {"amodal": np.repeat(truth.amodal[None, None], 2, 0),
            "visible": np.repeat(truth.visible[None, None], 2, 0),
            "present": np.repeat(truth.present[None], 2, 0)}
    seen = {}

    def compose(rows, title):
        seen["rows"], seen["title"] = rows, title
        return "sheet"
    monkeypatch.setattr(figures, "compose", compose)
    assert figures.qualitative_figure(toy, None, frames, None, "T", test=test, first=5) == "sheet"
    lines = [r for r in seen["rows"] if isinstance(r, str)]
    # the toy's flat 0.5 masks are empty at the threshold: IoU 0 for every present shape
    assert lines == [f"test pair {i}: amodal IoU 0.000, visible IoU 0.000 (fixed assignment)"
                     for i in (5, 6)]
    assert seen["title"].startswith("T; capsules by shape (chosen on the 2 pairs drawn): ")
    assert [len(r) for r in seen["rows"] if not isinstance(r, str)][:3] == [2, 6, 6]
    monkeypatch.undo()
    sheet = figures.compose(["a line"] + seen["rows"][1:4], "T")
    assert sheet.size[1] == (figures.LABEL_H + figures.PAD
                             + 3 * (figures.TILE + figures.LABEL_H + figures.PAD)
                             + figures.LABEL_H + 2 * figures.PAD)


def _parts_case():
    """Two parts (torso on the left half, head top right) and three capsules: capsule 2 draws
    the torso, capsule 0 the head, capsule 1 nothing."""
    h = 8
    amodal = np.zeros((2, h, h), bool)
    amodal[0, :, :4] = True  # torso
    amodal[1, :2, 4:] = True  # head
    visible = np.zeros((h, h), np.uint8)
    visible[amodal[0]], visible[amodal[1]] = 1, 2
    masks = np.zeros((1, 3, h, h), np.float32)
    masks[0, 2], masks[0, 0] = amodal[0], amodal[1]
    pred = Prediction(masks=masks, visible=masks.copy(), flow=None,
                      features=np.zeros((1, 2), np.float32))
    caps = {"torso": 2, "head": 0}
    assignment = figures.Assignment.of({"assignment": caps, "visible_assignment": caps}, "given",
                                       ("torso", "head"))
    return pred, figures.Truth(amodal, visible, np.array([True, True]), assignment)


def test_the_parts_figure_paints_each_capsule_in_its_parts_colour():
    from benchmark import parts_figure as pf
    from geogen.sheet import PALETTE
    pred, truth = _parts_case()
    frame = np.full((8, 8, 3), 200, np.uint8)
    row = pf.parts_row(frame, pred.masks[0], pred.visible[0], truth)
    assert [label for label, _ in row] == ["I", "gt parts", "capsules' parts",
                                           "2: torso", "0: head", "capsule 1"]
    scale = figures.TILE // 8  # tiles are nearest-neighbour enlargements

    def at(tile, y, x):
        return tuple(np.asarray(tile)[y * scale, x * scale])
    gt, found = row[1][1], row[2][1]
    dim = (int(200 * pf.DIM),) * 3
    for tile in (gt, found):  # the method found both parts: the two maps agree
        assert at(tile, 5, 1) == tuple(PALETTE[1]) and at(tile, 0, 6) == tuple(PALETTE[2])
        assert at(tile, 5, 6) == dim  # background: the darkened image
    assert at(row[3][1], 5, 1) == tuple(PALETTE[1]) and at(row[3][1], 0, 6) == dim
    assert at(row[5][1], 5, 1) == dim  # the spare capsule's mask is empty
    # a capsule no part is assigned to is white where it wins
    assert tuple(pf.capsule_colours((2, -1), 3)[0]) == tuple(pf.SPARE)
    assert pf.capsule_order((2, 0), 4) == [2, 0, 1, 3]
    with pytest.raises(ValueError, match="palette"):
        pf.part_colours(len(PALETTE))


def test_an_assignment_of_other_slots_is_refused_in_one_line():
    with pytest.raises(BenchmarkError, match="names no slot 'torso'"):
        figures.Assignment.of({"assignment": {"circle": 0}}, "a record", ("torso",))
    caps = {"torso": 1, "head": -1}
    a = figures.Assignment.of({"assignment": caps, "visible_assignment": caps}, "a record",
                              ("torso", "head"))
    assert a.text() == "capsules by part (a record): torso 1, head -1"
    b = figures.Assignment.of({"assignment": caps, "visible_assignment": {"torso": -1, "head": 1}},
                              "a record", ("torso", "head"))
    assert b.text() == ("capsules by part (a record): torso 1, head -1; "
                        "visible: torso -1, head 1")


def test_show_draws_the_parts_figure_of_articulated_data(tmp_path, register_toy):
    from benchmark.show import show
    from geogen.make import MakeConfig, make_dataset
    toy = register_toy()
    root = make_dataset(MakeConfig(variant="articulated", n=2, val=0, test=3, size=32,
                                   out=str(tmp_path / "artic"), workers=1), progress=False)
    ckpt = tmp_path / "toy.ckpt"
    ckpt.write_text('{"size": 32}')
    for kind in ("parts", "pairs"):
        out = show(ckpt, tmp_path / f"{kind}.png", method_name=toy.name, dataset="articulated",
                   data=root, pairs=2, start=1, kind=kind, echo=lambda _: None)
        assert out.is_file()
    parts, pairs = (Image.open(tmp_path / f"{k}.png") for k in ("parts", "pairs"))
    # parts: a text line and one row of 3 + K tiles per pair; pairs: ten parts' masks per row
    assert parts.size[0] == 6 * (figures.TILE + figures.PAD) + figures.PAD
    assert pairs.size[0] == (10 + 3) * (figures.TILE + figures.PAD) + figures.PAD
    with pytest.raises(BenchmarkError, match="unknown figure kind"):
        show(ckpt, tmp_path / "x.png", method_name=toy.name, dataset="articulated", data=root,
             pairs=1, start=0, kind="nope")


def test_a_pairs_iou_counts_every_part_of_the_data():
    names = ("a", "b", "c", "d")  # more parts than Geo's three shapes
    visible = np.repeat(np.arange(1, 5, dtype=np.uint8), 4)[None].repeat(4, 0)  # (4, 16)
    amodal = visible[None] == np.arange(1, 5)[:, None, None]  # (4, 4, 16)
    masks = amodal[None].astype(np.float32)
    pred = Prediction(masks=masks, visible=masks.copy(), flow=None,
                      features=np.zeros((1, 2), np.float32))
    caps = dict(zip(names, range(4)))
    assignment = figures.Assignment.of({"assignment": caps, "visible_assignment": caps}, "given",
                                       names)
    truth = figures.Truth(amodal, visible, np.ones(4, bool), assignment)
    assert figures.pair_iou(pred, 0, truth) == (1.0, 1.0)

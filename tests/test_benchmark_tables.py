import csv
import io
import json
from importlib import resources

from benchmark import tables
from benchmark.paper import paper_cells, paper_value


def _rec(method="flowcaps", dataset="geo", profile="quick", seed=0, all_iou=0.9,
         axes=(8, 27, 3, True), variant=None, k4=0.8, supersample=5):
    names = ("num_capsules", "shape_dim", "decoder_depth", "depth_ordering")
    variant = variant or {}
    return {"method": method, "dataset": dataset, "profile": profile, "seed": seed,
            "axes": dict(zip(names, axes)),
            "variant": {n: variant.get(n) for n in names},
            "data": {} if supersample is None else {"supersample": supersample},
            "metrics": {"amodal_iou": {"circle": all_iou, "square": all_iou,
                                       "triangle": all_iou, "all": all_iou},
                        "kmeans_4": k4, "kmeans_100": None}}


def _cell(table, labels, column):
    col = table.columns.index(column)
    for row_labels, cells in table.rows:
        if row_labels == labels:
            return cells[col]
    raise KeyError(labels)


def test_table1_mean_std_paper_and_missing_cells():
    recs = [_rec(seed=0, all_iou=0.90), _rec(seed=1, all_iou=0.92)]
    t = tables.table1(recs)
    c = _cell(t, ["Geo", "all"], "FlowCapsules")
    assert c.ours() == "0.910 ± 0.014 (quick, 2 seeds)"
    assert c.theirs() == "0.95"  # the paper's Geo "all", Table 1
    assert _cell(t, ["Geo", "all"], "PSD").ours() == "-"
    assert _cell(t, ["Geo", "all"], "PSD").theirs() == "?"  # not transcribed
    assert _cell(t, ["Geo+", "circle"], "FlowCapsules").ours() == "-"
    assert "flowbench run flowcaps --dataset geo+" in t.missing
    assert _cell(t, ["Exercise", "all"], "FlowCapsules").ours() == tables.NOT_PUBLIC


def test_best_profile_wins_and_ablation_runs_stay_out_of_table1():
    recs = [_rec(profile="quick", all_iou=0.5), _rec(profile="paper", all_iou=0.96),
            _rec(all_iou=0.1, axes=(4, 27, 3, True), variant={"num_capsules": 4})]
    c = _cell(tables.table1(recs), ["Geo", "all"], "FlowCapsules")
    assert c.values == (0.96,) and c.profile == "paper"


def test_current_data_wins_and_older_data_is_named():
    old_long = _rec(profile="long", all_iou=0.96, supersample=None)  # written before the field
    t = tables.table1([old_long, _rec(profile="gpu", all_iou=0.92)])
    assert _cell(t, ["Geo", "all"], "FlowCapsules").ours() == "0.920 (gpu)"
    c = _cell(tables.table1([old_long, _rec(profile="quick", all_iou=0.9, supersample=4)]),
              ["Geo", "all"], "FlowCapsules")
    assert c.ours() == "0.960 (long, 4x4 data)"
    rows = list(csv.DictReader(io.StringIO(tables.render_csv([tables.table1([old_long])]))))
    assert {r["note"] for r in rows if r["row"] == "Geo / all" and r["column"] == "FlowCapsules"} \
        == {"4x4 data"}


def test_table3_rows_pick_matching_axes_only():
    recs = [_rec(all_iou=0.9), _rec(all_iou=0.7, axes=(4, 27, 3, True), variant={"num_capsules": 4}),
            _rec(all_iou=0.6, axes=(8, 27, 2, True), variant={"decoder_depth": 2})]
    t = tables.table3(recs)
    assert _cell(t, ["K=8"], "Geo").values == (0.9,)  # the default run fills its own rows
    assert _cell(t, ["|s|=27"], "Geo").values == (0.9,)
    assert _cell(t, ["depth ordering on"], "Geo").values == (0.9,)
    assert _cell(t, ["K=4"], "Geo").values == (0.7,)
    assert _cell(t, ["decoder depth 2"], "Geo").values == (0.6,)
    assert _cell(t, ["decoder depth 6"], "Geo").values == ()
    assert _cell(t, ["decoder depth 2"], "Geo+").ours() == "n/a"
    assert t.missing == {"flowbench ablate --dataset geo", "flowbench ablate --dataset geo+"}


def test_renderers_markdown_latex_csv():
    recs = [_rec(seed=0, all_iou=0.9, k4=0.75), _rec(seed=1, all_iou=0.8, k4=0.85)]
    built = tables.build_tables(recs)
    md = tables.render_markdown(built)
    assert md.count("**Table") == 3 and "| Geo | all | - | ? | - | ? | 0.850 ± 0.071" in md
    assert "| \\|s\\|=3 | - |" in md  # a bare | would split the markdown cell
    assert f"| Exercise | all | {tables.NOT_PUBLIC} |  |" in md
    tex = tables.render_latex(built)
    assert tex.count("\\begin{tabular}") == 3 and "$\\pm$" in tex and "$|$s$|$=3" in tex
    rows = list(csv.DictReader(io.StringIO(tables.render_csv(built))))
    geo_all = [r for r in rows if r["row"] == "Geo / all" and r["column"] == "FlowCapsules"][0]
    assert float(geo_all["ours_mean"]) == 0.85 and geo_all["seeds"] == "2"
    assert geo_all["paper"] == "0.95" and geo_all["profile"] == "quick"
    k4 = [r for r in rows if r["row"] == "FlowCapsules" and r["column"] == "Geo N=4"][0]
    assert float(k4["ours_mean"]) == 0.8


def test_paper_data_covers_every_table_cell_with_a_source():
    raw = json.loads(resources.files("benchmark").joinpath("data/paper.json").read_text())
    assert len(raw["cells"]) == len(paper_cells())  # no duplicate keys
    for cell in paper_cells().values():
        assert cell.source.startswith(f"Table {cell.table}")
        assert cell.value is None or 0.0 <= cell.value <= 1.0
        assert cell.note
    assert [paper_value(1, "geo", "flowcaps", r) for r in ("circle", "square", "triangle", "all")] \
        == [0.94, 0.98, 0.98, 0.95]
    keys = set(paper_cells())
    for ds in ("geo", "geo+"):
        for row in ("circle", "square", "triangle", "all"):
            assert {(1, ds, m, row) for m in ("rnem", "psd", "flowcaps")} <= keys
        for n in (4, 100):
            assert {(2, ds, m, f"N={n}") for m in ("scae", "flowcaps")} <= keys
    for label, _, _, datasets in tables.ABLATION_ROWS:
        assert {(3, ds, "flowcaps", label) for ds in datasets} <= keys


def test_ablation_grid_fills_every_table3_row():
    from dataclasses import asdict

    from benchmark.runner import ablation_grid
    default = {"num_capsules": 8, "shape_dim": 27, "decoder_depth": 3, "depth_ordering": True}
    for ds in ("geo", "geo+"):
        grid = ablation_grid(ds)
        assert grid[0].tag() == ""  # the default run comes first
        runs = []
        for v in grid:
            set_axes = {k: x for k, x in asdict(v).items() if x is not None}
            assert len(set_axes) <= 1  # one change at a time
            runs.append(_rec(dataset=ds, axes=tuple({**default, **set_axes}.values()),
                             variant=set_axes))
        t = tables.table3(runs)
        for label, _, _, datasets in tables.ABLATION_ROWS:
            if ds in datasets:
                assert _cell(t, [label], tables.DATASET_TITLES[ds]).values, (ds, label)

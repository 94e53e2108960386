import csv
import io
import json
import os
import re
from importlib import resources
from pathlib import Path

import pytest

from benchmark import paper_tables as spec
from benchmark import render, tables
from benchmark.paper import paper_cells, paper_text, paper_value
from benchmark.registry import Axes, load_methods
from benchmark.runner import ablation_grid

NAMES = ("num_capsules", "shape_dim", "decoder_depth", "depth_ordering")


def _parts(v):
    return {"circle": v, "square": v, "triangle": v, "all": v}


CEILING = {"circle": 0.655, "square": 0.921, "triangle": 1.0, "all": 0.832}


def _rec(method="flowcaps", dataset="geo", profile="quick", seed=0, all_iou=0.9,
         axes=(8, 27, 3, True), variant=None, k4=0.8, local=False, visible=None, look="paper"):
    """A record; with `visible` its visible numbers and the dataset's ceiling; `look` is its
    data's (read for Geo+ only; None: a record made before looks were recorded)."""
    variant = variant or {}
    seen = {} if visible is None else {
        "visible_iou": _parts(visible), "visible_iou_per_image": _parts(visible + 0.01),
        "ceiling": CEILING, "n_test": 10000}
    return {"method": method, "dataset": dataset, "profile": profile, "seed": seed,
            "axes": dict(zip(NAMES, axes)),
            "variant": {n: variant.get(n) for n in NAMES},
            "data": {"supersample": 5, **({"look": look} if look else {})},
            "metrics": {"amodal_iou": _parts(all_iou),
                        "amodal_iou_per_image": _parts(all_iou + 0.02),
                        "kmeans_4": k4, "kmeans_100": None, "kmeans_rule": "majority",
                        "segmentation_rule": 2, **seen},
            "checkpoint": f"checkpoints/{method}_{dataset}.pt",
            "checkpoint_sha256": None,
            "_path": f"results/records/{dataset}/{method}/{profile}/seed{seed}.json",
            "_local": local}


def _cell(table, labels, column):
    col = table.columns.index(column)
    for row_labels, cells in table.rows:
        if row_labels[:len(labels)] == labels:  # Table 3's rows also say how they were scored
            return cells[col]
    raise KeyError(labels)


def _t1(recs, **kw):
    return tables.table1(recs, load_methods(), **kw)


def test_table1_mean_std_paper_and_missing_cells():
    recs = [_rec(seed=0, all_iou=0.90), _rec(seed=1, all_iou=0.92)]
    t = _t1(recs)
    c = _cell(t, ["Geo", "all"], "FlowCapsules")
    assert c.ours() == "0.910 ± 0.014 / 0.930 ± 0.014 (quick, 2 seeds)"  # fixed / per image
    assert c.theirs() == "0.95"  # the paper's Geo "all", Table 1
    assert c.per_image == pytest.approx((0.92, 0.94))
    # Visible-only methods: no ceiling known yet (no record has one), and the paper's cells
    # stand in Table 1b.
    assert _cell(t, ["Geo", "all"], "R-NEM†").ours() == "ceiling: -"
    assert _cell(t, ["Geo", "all"], "PSD†‡").theirs() == ""
    assert _cell(t, ["Geo+", "all"], "FlowCapsules").theirs() == "0.89"  # from its text
    assert _cell(t, ["Geo+", "circle"], "FlowCapsules").ours() == "-"
    assert "flowbench run flowcaps --dataset geo+" in t.missing
    assert not any("psd" in cmd for cmd in t.missing)  # its cells are the ceiling
    ex = _cell(t, ["Exercise", "left leg"], "R-NEM†")
    assert ex.ours() == tables.NOT_PUBLIC and ex.theirs() == ""
    assert _cell(t, ["Exercise", "all"], "FlowCapsules").theirs() == "0.58"
    v = tables.table1_visible(recs, load_methods())
    assert _cell(v, ["Geo", "all"], "PSD‡").theirs() == "0.88"  # visible masks, sees flow
    assert _cell(v, ["Geo+", "all"], "PSD‡").theirs() == "n/r"  # the paper has no number
    assert _cell(v, ["Exercise", "left leg"], "R-NEM").theirs() == "0.29"
    assert _cell(v, ["Geo", "all"], "FlowCapsules").theirs() == ""  # its paper cell is 1a's


def test_visible_only_methods_show_the_ceiling_in_1a_and_their_visible_iou_in_1b():
    recs = [_rec(method="psd", all_iou=0.40, visible=0.35),
            _rec(method="psd", seed=1, all_iou=0.42, visible=0.37),
            _rec(all_iou=0.90, visible=0.80)]
    a = _t1(recs)
    for part in spec.PARTS:  # never PSD's own amodal score
        assert _cell(a, ["Geo", part], "PSD†‡").ours() == f"ceiling {CEILING[part]:.3f}"
    assert any("Geo (10000 pairs): circle 0.655, square 0.921, triangle 1.000, all 0.832" in n
               for n in a.notes)
    assert _cell(a, ["Geo+", "all"], "PSD†‡").ours() == "ceiling: -"  # no Geo+ record
    v = tables.table1_visible(recs, load_methods())
    psd = _cell(v, ["Geo", "all"], "PSD‡")
    assert psd.ours() == "0.360 ± 0.014 / 0.370 ± 0.014 (quick, 2 seeds)"
    assert psd.theirs() == "0.88"
    assert _cell(v, ["Geo", "circle"], "FlowCapsules").ours() == "0.800 / 0.810 (quick)"
    rows = list(csv.DictReader(io.StringIO(render.render_csv([a, v]))))
    [ceil] = [r for r in rows if r["table"] == "Table 1a" and r["row"] == "Geo / circle"
              and r["column"] == "PSD†‡"]
    assert ceil["ours_mean"] == "" and float(ceil["ceiling"]) == 0.655
    [vis] = [r for r in rows if r["table"] == "Table 1b" and r["row"] == "Geo / all"
             and r["column"] == "PSD‡"]
    assert float(vis["ours_mean"]) == pytest.approx(0.36)
    assert float(vis["ours_per_image_mean"]) == pytest.approx(0.37)


def test_every_method_shows_both_assignments_in_table1_with_no_per_method_switch():
    """R-NEM (whose groups stand for no kind of part) and every other method: each Table 1 cell
    is the fixed assignment's number, then the per-image one's (here visible + 0.01, amodal +
    0.02); a record without the per-image number shows - on that side, with a note."""
    recs = [_rec(method="rnem", visible=0.20), _rec(method="psd", visible=0.35),
            _rec(method="kmeans-flow", visible=0.90), _rec(all_iou=0.90, visible=0.80)]
    lacking = _rec(method="motiongrouping", visible=0.30)
    del lacking["metrics"]["visible_iou_per_image"]
    v = tables.table1_visible(recs + [lacking], load_methods())
    assert _cell(v, ["Geo", "all"], "R-NEM").ours() == "0.200 / 0.210 (quick)"
    assert _cell(v, ["Geo", "all"], "PSD‡").ours() == "0.350 / 0.360 (quick)"
    assert _cell(v, ["Geo", "all"], "FlowCapsules").ours() == "0.800 / 0.810 (quick)"
    calib = "k-means on the exact flow (calibration)‡"
    assert _cell(v, ["Geo", "all"], calib).ours() == "0.900 / 0.910 (quick)"
    assert _cell(v, ["Geo", "all"], "Motion Grouping‡").ours() == "0.300 / - (quick)"
    assert ("Motion Grouping‡: some records lack the per-image assignment's number, so the "
            "per-image side of those cells is -.") in v.notes
    a = _t1(recs)
    assert _cell(a, ["Geo", "all"], "FlowCapsules").ours() == "0.900 / 0.920 (quick)"
    assert not any("per-image side" in n for n in a.notes)  # every record has both
    md = render.render_markdown([a, v])
    for col in ("R-NEM", "FlowCapsules", "Motion Grouping‡", calib):
        assert f"| {col} (ours: fixed / per image) | {col} (paper) |" in md
    assert "¶" not in md and not hasattr(load_methods()["rnem"], "interchangeable_groups")
    tex = render.render_latex([v])
    assert "0.200 / 0.210 (quick)" in tex and "fixed / per image" in tex
    rows = list(csv.DictReader(io.StringIO(render.render_csv([v]))))
    [rnem] = [r for r in rows if r["row"] == "Geo / all" and r["column"] == "R-NEM"]
    assert (float(rnem["ours_mean"]), float(rnem["ours_per_image_mean"])) == (0.2, 0.21)


def test_a_registered_method_shows_up_everywhere_with_no_other_edit(register_toy, tmp_path):
    from click.testing import CliRunner

    from benchmark import records
    from benchmark.cli import main
    load_methods()  # the real methods first, so the toy's column comes last in any test order
    toy = register_toy(name="toy-new", title="Toy Baseline", amodal=False,
                       uses_ground_truth=("flow",))
    rec = records.make_record(
        method=toy.name, dataset="geo", profile="quick", seed=0, run_seed=1, axes=Axes(),
        variant=Axes(), metrics={"amodal_iou": {"circle": 0.5, "square": 0.6, "triangle": 0.7,
                                                "all": 0.6}, "kmeans_4": 0.4, "kmeans_100": 0.5,
                                 "kmeans_rule": "majority", "segmentation_rule": 2,
                                 "visible_iou": _parts(0.55), "ceiling": CEILING,
                                 "n_test": 10000},
        config={}, data={"supersample": 5}, checkpoint=None, device="cpu", wall={},
        started_at=records.now(), command="flowbench run toy-new")
    records.write_record(tmp_path, rec)
    out = CliRunner().invoke(main, ["table", "--results", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert ("| Toy Baseline†‡ (ours: fixed / per image) | Toy Baseline†‡ (paper) |"
            in out.output)  # Table 1a column
    assert ("| Toy Baseline‡ (ours: fixed / per image) | Toy Baseline‡ (paper) |"
            in out.output)  # Table 1b column
    # 1a: its cells are the ceiling (its own amodal 0.600 is never shown); 1b: its visible IoU.
    assert ("| Geo | all | ceiling 0.832 |  | ceiling 0.832 |  | - | 0.95 | - |  | "
            "ceiling 0.832 |  |") in out.output
    # 1b: R-NEM's and PSD's paper cells first, the toy's visible IoU in the last column (other
    # registered methods' columns, without records, between them)
    row = next(line for line in out.output.splitlines()
               if line.startswith("| Geo | all | - | 0.56 | - | 0.88 | - |  | - |  |"))
    assert row.endswith("| 0.550 / - (quick, local) |  |")  # its record has no per-image IoU
    assert "Toy Baseline‡: some records lack the per-image assignment's number" in out.output
    assert "0.600" not in out.output
    assert "| Toy Baseline | 0.400 (quick, local) |  | 0.500 (quick, local) |" in out.output  # Table 2 row
    # one note per mark, naming every method it applies to
    [amodal_note] = [line for line in out.output.splitlines() if line.startswith("† ")]
    assert "Toy Baseline" in amodal_note and "PSD" in amodal_note and "their cells" in amodal_note
    gt_notes = [line for line in out.output.splitlines() if line.startswith("‡ ")]
    assert gt_notes and all("Toy Baseline" in n and n.endswith(
        "see the ground-truth flow at test time.") for n in gt_notes)
    listed = CliRunner().invoke(main, ["list"])
    assert "toy-new" in listed.output and "Toy Baseline" in listed.output
    assert "quick: about a minute" in listed.output


def test_table2_keys_the_papers_flowcapsules_row_to_flowscae_and_labels_ours():
    t = tables.table2([_rec(k4=0.75)], load_methods())
    labels = [r[0][0] for r in t.rows]
    assert labels[:2] == ["SCAE", spec.PAPER_TITLES["flowscae"]]
    ours = "FlowCapsules, k-means on raw capsule vectors"
    assert ours in labels
    assert _cell(t, [ours], "Geo N=4").ours() == "0.750 (quick)"
    assert _cell(t, [ours], "Geo N=4").theirs() == ""  # the paper has no such row
    assert _cell(t, [spec.PAPER_TITLES["flowscae"]], "Geo N=100").theirs() == "0.99"
    assert "flowbench run flowscae --dataset geo" in t.missing


def test_best_profile_wins_and_ablation_runs_stay_out_of_table1():
    recs = [_rec(profile="quick", all_iou=0.5), _rec(profile="paper", all_iou=0.96),
            _rec(all_iou=0.1, axes=(4, 27, 3, True), variant={"num_capsules": 4})]
    c = _cell(_t1(recs), ["Geo", "all"], "FlowCapsules")
    assert c.values == (0.96,) and c.profile == "paper"
    only = _cell(_t1(recs, profile="quick"), ["Geo", "all"], "FlowCapsules")
    assert only.values == (0.5,) and only.profile == "quick"


def test_local_runs_are_named():
    mine = _t1([_rec(local=True, profile="long")])
    assert _cell(mine, ["Geo", "all"], "FlowCapsules").ours() == "0.900 / 0.920 (long, local)"
    rows = list(csv.DictReader(io.StringIO(render.render_csv([mine]))))
    [row] = [r for r in rows if r["row"] == "Geo / all" and r["column"] == "FlowCapsules"]
    assert row["note"] == "local" and row["records"].endswith("long/seed0.json")


def test_table3_rows_are_the_papers_configurations():
    assert [r.label for r in spec.ABLATION_ROWS] == [
        "K=4, |s|=11", "K=8, |s|=11", "K=16, |s|=11", "K=8, |s|=3", "K=8, |s|=27",
        "depth ordering off, 6-layer decoder", "depth ordering on, 2-layer decoder",
        "depth ordering on, 6-layer decoder"]
    assert all(r.datasets == ("geo",) for r in spec.ABLATION_ROWS[5:])


def test_table3_a_record_fills_a_row_only_on_its_exact_configuration():
    recs = [_rec(all_iou=0.90),  # the default: K 8, |s| 27, 3-layer decoder, depth on
            _rec(all_iou=0.70, axes=(4, 27, 3, True), variant={"num_capsules": 4}),
            _rec(all_iou=0.71, axes=(4, 11, 3, True), variant={"num_capsules": 4, "shape_dim": 11}),
            _rec(all_iou=0.60, axes=(8, 27, 2, True), variant={"decoder_depth": 2}),
            _rec(all_iou=0.50, axes=(8, 27, 6, False), variant={"decoder_depth": 6,
                                                                "depth_ordering": False}),
            _rec(all_iou=0.40, axes=(8, 11, 6, False), variant={"shape_dim": 11}),
            _rec(all_iou=0.30, axes=(8, 27, 6, True), variant={"decoder_depth": 6},
                 dataset="geo+"),
            # a model whose own default decoder has 6 layers (no override)
            _rec(all_iou=0.35, axes=(8, 27, 6, True), dataset="geo+", profile="gpu")]
    t = tables.table3(recs)
    assert _cell(t, ["K=8, |s|=27"], "Geo").values == (0.9,)  # the decoder depth is free there
    assert _cell(t, ["K=4, |s|=11"], "Geo").values == (0.71,)  # K=4 at |s|=27 fills nothing
    assert _cell(t, ["K=8, |s|=11"], "Geo").values == ()  # depth off is not the paper's model
    assert _cell(t, ["depth ordering on, 2-layer decoder"], "Geo").values == (0.6,)
    assert _cell(t, ["depth ordering off, 6-layer decoder"], "Geo").values == (0.5,)
    assert _cell(t, ["depth ordering on, 6-layer decoder"], "Geo").values == ()  # ours is 3
    # an override of an axis a row leaves free keeps the run out of that row
    assert _cell(t, ["K=8, |s|=27"], "Geo+").values == (0.35,)
    assert _cell(t, ["depth ordering on, 6-layer decoder"], "Geo+").ours() == "n/a"
    assert _cell(t, ["K=8, |s|=27"], "Geo").theirs() == "0.96"
    assert t.missing == {"flowbench ablate --dataset geo", "flowbench ablate --dataset geo+"}


def test_table3_prints_a_collapsed_run_as_collapsed_with_the_reason_never_0():
    dead = {"decoder_depth": 6, "depth_ordering": False}
    recs = [_rec(all_iou=0.0, axes=(8, 27, 6, False), variant=dead),
            _rec(all_iou=0.0, axes=(8, 27, 2, True), variant={"decoder_depth": 2}),
            _rec(all_iou=0.8, axes=(8, 27, 2, True), variant={"decoder_depth": 2}, seed=1),
            _rec(all_iou=0.6, axes=(8, 27, 2, True), variant={"decoder_depth": 2}, seed=2)]
    t = tables.table3(recs)
    off = _cell(t, ["depth ordering off, 6-layer decoder"], "Geo")
    assert off.values == () and off.ours() == "collapsed (quick)"
    two = _cell(t, ["depth ordering on, 2-layer decoder"], "Geo")
    assert two.values == (0.8, 0.6)  # the collapsed seed is counted, not averaged in
    assert two.ours() == "0.700 ± 0.141 (quick, 2 seeds; 1 collapsed)"
    assert any(n.startswith("collapsed: every amodal IoU of the run is 0.001 or less") for n in t.notes)
    md = render.render_markdown([t])
    assert "| collapsed (quick) |" in md and "0.000" not in md
    # a low score that is not a collapse stays a number, and no note is added
    low = tables.table3([_rec(all_iou=0.02, axes=(8, 27, 6, False), variant=dead)])
    assert _cell(low, ["depth ordering off, 6-layer decoder"], "Geo").ours() == "0.020 (quick)"
    assert not any("collapsed" in n for n in low.notes)


def test_table3_rows_state_how_their_masks_were_scored():
    t = tables.table3([])
    scored = {labels[0]: labels[1] for labels, _ in t.rows}
    assert t.row_header == ["ablation", "masks scored"]
    assert scored["depth ordering off, 6-layer decoder"] == spec.SCORED_UNORDERED
    assert all(v == spec.SCORED_ORDERED for k, v in scored.items() if "off" not in k)
    assert "softmax over k of Lambda_k (normalised) > 0.5" in spec.SCORED_UNORDERED


def test_the_ablation_grid_is_the_table3_rows_and_fills_every_one():
    method = load_methods()["flowcaps"]
    for ds in spec.DATASETS:
        grid = ablation_grid(method, ds, "quick")
        assert grid[0] == Axes() and len(set(grid)) == len(grid)  # the default run first, once
        runs = []
        for v in grid:
            from benchmark.registry import TrainSpec
            resolved = method.axes(TrainSpec(dataset=ds, profile="quick", seed=0,
                                             data_root=Path("x"), run_dir=Path("x"),
                                             image_size=64, variant=v))
            runs.append(_rec(dataset=ds, axes=tuple(getattr(resolved, n) for n in NAMES),
                             variant={n: getattr(v, n) for n in NAMES}))
        t = tables.table3(runs)
        for row in spec.ablation_rows(ds):
            assert len(_cell(t, [row.label], spec.DATASET_TITLES[ds]).values) == 1, (ds, row)
    assert len(ablation_grid(method, "geo", "quick")) == 8  # (8, 27) is the default run
    assert len(ablation_grid(method, "geo+", "quick")) == 5


def test_renderers_markdown_latex_csv():
    recs = [_rec(seed=0, all_iou=0.9, k4=0.75), _rec(seed=1, all_iou=0.8, k4=0.85)]
    built = tables.build_tables(recs)
    md = render.render_markdown(built)
    assert md.count("**Table") == 4
    assert "| Geo | all | ceiling: - |  | ceiling: - |  | 0.850 ± 0.071" in md
    # a bare | would split the markdown cell
    assert f"| K=8, \\|s\\|=3 | {spec.SCORED_ORDERED} | - |" in md
    assert "| Exercise | all | not public | 0.28 |" in md
    assert "?" not in md.replace("?|", "")  # every paper number is transcribed
    tex = render.render_latex(built)
    assert tex.count("\\begin{tabular}") == 4 and "$\\pm$" in tex and "$|$s$|$=3" in tex
    rows = list(csv.DictReader(io.StringIO(render.render_csv(built))))
    geo_all = [r for r in rows if r["row"] == "Geo / all" and r["column"] == "FlowCapsules"][0]
    assert float(geo_all["ours_mean"]) == 0.85 and geo_all["seeds"] == "2"
    assert geo_all["paper"] == "0.95" and geo_all["profile"] == "quick"
    ours = "FlowCapsules, k-means on raw capsule vectors"
    k4 = [r for r in rows if r["row"] == ours and r["column"] == "Geo N=4"][0]
    assert float(k4["ours_mean"]) == 0.8


def test_paper_data_covers_every_cell_the_tables_ask_for_with_a_source():
    raw = json.loads(resources.files("benchmark").joinpath("data/paper.json").read_text())
    assert len(raw["cells"]) == len(paper_cells())  # no duplicate keys
    for cell in paper_cells().values():
        assert cell.source and (cell.value is None) == bool(cell.note and cell.value is None)
        assert cell.value is None or 0.0 <= cell.value <= 1.0
    assert [paper_value(1, "geo", "flowcaps", r) for r in spec.PARTS] == [0.94, 0.98, 0.98, 0.95]
    keys = set(paper_cells())
    for ds in spec.DATASETS + ("exercise",):
        parts = spec.EXERCISE_PARTS if ds == "exercise" else spec.PARTS
        assert {(1, ds, m, p) for m in spec.TABLE1.paper_methods for p in parts} <= keys
    for ds in spec.DATASETS:
        assert {(2, ds, m, f"N={n}") for m in spec.TABLE2.paper_methods
                for n in spec.CLUSTERS} <= keys
    for row in spec.ABLATION_ROWS:
        assert {(3, ds, "flowcaps", row.label) for ds in row.datasets} <= keys


# The project's transcription of the paper sits beside the repository (PAPER_TABLES overrides).
PAPER_TABLES = Path(os.environ.get("PAPER_TABLES") or
                    Path(__file__).resolve().parents[2] / "shared" / "paper-tables.md")


@pytest.mark.skipif(not PAPER_TABLES.is_file(), reason="../shared/paper-tables.md is not here")
def test_paper_json_holds_every_number_of_the_transcription():
    text = PAPER_TABLES.read_text()
    cells = paper_cells()
    methods = {"R-NEM": "rnem", "PSD": "psd", "FlowCapsules": "flowcaps", "SCAE": "scae",
               "FlowCapsules (as FlowSCAE)": "flowscae"}
    found = 0
    for block in re.findall(r"(?:^\|.*\|\n)+", text, flags=re.M):
        lines = [[c.strip() for c in line.strip().strip("|").split("|")]
                 for line in block.strip().splitlines()]
        head, body = lines[0], [r for r in lines[2:]]
        for row in body:
            if head[:2] == ["dataset", "part"]:  # Table 1
                for name, v in zip(head[2:], row[2:]):
                    key = (1, row[0].lower(), methods[name], row[1])
                    assert cells[key].value == float(v), key
                    found += 1
            elif head[0] == "method":  # Table 2
                for col, v in zip(head[1:], row[1:]):
                    ds, n = col.split()
                    key = (2, ds.lower(), methods[row[0]], n)
                    assert cells[key].value == float(v), key
                    found += 1
            elif head[0] == "K":  # Table 3, K and |s|
                for ds, v in zip(("geo", "geo+"), row[2:]):
                    key = (3, ds, "flowcaps", f"K={row[0]}, |s|={row[1]}")
                    assert cells[key].value == float(v), key
                    found += 1
            elif head[0] == "depth ordering":
                on = {"yes": "on", "no": "off"}[row[0]]
                key = (3, "geo", "flowcaps",
                       f"depth ordering {on}, {row[1].split('-')[0]}-layer decoder")
                assert cells[key].value == float(row[2]), key
                found += 1
    assert found == 24 + 8 + 10 + 3
    # The numbers of its prose (Geo+ FlowCapsules, the 0.96 of the text, the 28 clusters).
    prose = re.sub(r"(?:^\|.*\|\n)+", "", text, flags=re.M)
    stated = {float(x) for x in re.findall(r"(?<![\d.])(0\.\d\d|\d+)(?![\d.])",
                                           prose.split("## Settings")[0])}
    stated -= {1.0, 2.0, 3.0, 4.0, 100.0, 2021.0}  # table numbers, N, the year
    have = {c.value for c in cells.values()} | {t.value for t in paper_text(1) + paper_text(2)}
    assert stated <= have, stated - have
    for geo_plus, part in zip((0.85, 0.93, 0.90, 0.89), spec.PARTS):
        assert cells[(1, "geo+", "flowcaps", part)].value == geo_plus


def test_a_local_run_beside_committed_ones_gets_its_own_row_in_every_format():
    """After `make demo`: the user's seed 0 (0.874) beside the committed seeds 0-2. The
    committed cell keeps its three seeds; the local run has its own row, in md, latex and csv."""
    committed = [_rec(seed=s, all_iou=v, visible=v) for s, v in ((0, 0.93), (1, 0.92), (2, 0.91))]
    mine = {**_rec(seed=0, all_iou=0.874, visible=0.8, local=True),
            "_path": "runs/records/geo/flowcaps/quick/seed0.json"}
    deeper = _rec(all_iou=0.7, axes=(8, 27, 6, True), variant={"decoder_depth": 6}, local=True)
    built = tables.build_tables(committed + [mine, deeper], profile="quick")
    t1 = built[0]
    assert (_cell(t1, ["Geo", "all"], "FlowCapsules").ours()
            == "0.920 ± 0.010 / 0.940 ± 0.010 (quick, 3 seeds)")
    local = _cell(t1, ["Geo (local)", "all"], "FlowCapsules")
    assert local.ours() == "0.874 / 0.894 (quick, local)" and local.theirs() == ""
    labels = [r[0] for r in t1.rows]
    assert labels.index(["Geo (local)", "all"]) == labels.index(["Geo", "all"]) + 1
    assert ["Geo+ (local)", "all"] not in labels  # only where a local run is
    assert (_cell(built[1], ["Geo (local)", "all"], "FlowCapsules").ours()
            == "0.800 / 0.810 (quick, local)")
    assert _cell(built[2], ["FlowCapsules, k-means on raw capsule vectors (local)"],
                 "Geo N=4").values == (0.8,)
    # a visible-only method's column: the ceiling stays in the committed row
    assert _cell(t1, ["Geo (local)", "all"], "R-NEM†").ours() == "-"
    row = ["depth ordering on, 6-layer decoder (local)"]
    assert [_cell(built[3], row, ds).ours() for ds in ("Geo", "Geo+")] == ["0.700 (quick, local)",
                                                                          "n/a"]
    md = render.render_markdown(built)
    assert "| Geo | all | ceiling 0.832 |  | ceiling 0.832 |  | 0.920 ± 0.010 / 0.940 ± 0.010 " \
           "(quick, 3 seeds) | 0.95 |" in md
    assert "| Geo (local) | all | - |  | - |  | 0.874 / 0.894 (quick, local) |  |" in md
    tex = render.render_latex(built)
    assert "Geo (local) & all & - &  & - &  & 0.874 / 0.894 (quick, local) &  &" in tex
    rows = list(csv.DictReader(io.StringIO(render.render_csv(built))))
    [ours] = [r for r in rows if r["table"] == "Table 1a" and r["row"] == "Geo / all"
              and r["column"] == "FlowCapsules"]
    [own] = [r for r in rows if r["table"] == "Table 1a" and r["row"] == "Geo (local) / all"
             and r["column"] == "FlowCapsules"]
    assert (ours["ours_mean"], ours["seeds"], ours["note"]) == ("0.920000", "3", "")
    assert "runs/records" not in ours["records"]
    assert (own["ours_mean"], own["seeds"], own["note"], own["paper"]) == ("0.874000", "1",
                                                                           "local", "")
    # local records alone (no committed tree read) fill the table's own rows, marked local
    alone = tables.build_tables([mine], profile="quick")[0]
    assert _cell(alone, ["Geo", "all"], "FlowCapsules").ours() == "0.874 / 0.894 (quick, local)"
    assert ["Geo (local)", "all"] not in [r[0] for r in alone.rows]


def test_a_local_record_never_hides_the_committed_record_of_the_same_run(tmp_path, monkeypatch):
    from benchmark import records
    from benchmark.registry import Axes
    monkeypatch.chdir(tmp_path)

    def write(root, seed, iou):
        rec = records.make_record(
            method="flowcaps", dataset="geo", profile="quick", seed=seed, run_seed=1,
            axes=Axes(8, 27, 3, True), variant=Axes(),
            metrics={"amodal_iou": _parts(iou), "segmentation_rule": 2}, config={},
            data={"supersample": 5}, checkpoint=None, device="cpu", wall={},
            started_at=records.now(), command="flowbench run flowcaps")
        records.write_record(root, rec)
    for seed, iou in ((0, 0.93), (1, 0.92), (2, 0.91)):
        write(records.COMMITTED, seed, iou)
    write(records.LOCAL, 0, 0.874)
    write(tmp_path / "mine", 0, 0.5)  # a second tree of the user's shadows the first
    loaded, _ = records.load_records([records.COMMITTED, records.LOCAL, tmp_path / "mine"])
    got = sorted((r["_local"], r["seed"], r["metrics"]["amodal_iou"]["all"]) for r in loaded)
    assert got == [(False, 0, 0.93), (False, 1, 0.92), (False, 2, 0.91), (True, 0, 0.5)]


def _articulated(method="flowcaps", seed=0, torso=0.7, leg=0.5, visible=0.4):
    """An articulated record: its Table 1 numbers are its "groups" (whole limbs)."""
    rec = _rec(method=method, dataset="articulated", seed=seed, visible=visible)
    groups = {"torso": torso, "left leg": leg, "right leg": leg, "all": (torso + 2 * leg) / 3}
    rec["metrics"]["groups"] = {"amodal_iou": groups, "amodal_iou_per_image": groups,
                                "visible_iou": {k: visible for k in groups},
                                "visible_iou_per_image": {k: visible for k in groups},
                                "ceiling": {k: 0.8 for k in groups}}
    return rec


def test_articulated_rows_stand_in_for_exercise_below_the_papers_rows():
    recs = [_articulated(seed=0), _articulated(seed=1, torso=0.8)]
    t = _t1(recs)
    title = spec.DATASET_TITLES[spec.STAND_IN]
    labels = [row for row, _ in t.rows]
    assert labels.index(["Exercise", "all"]) < labels.index([title, "torso"])
    torso = _cell(t, [title, "torso"], "FlowCapsules")
    assert torso.ours() == "0.750 ± 0.071 / 0.750 ± 0.071 (quick, 2 seeds)"
    assert torso.theirs() == ""
    assert _cell(t, [title, "left leg"], "FlowCapsules").values == (0.5, 0.5)
    assert _cell(t, ["Exercise", "all"], "FlowCapsules").theirs() == "0.58"   # still the paper's
    assert _cell(t, [title, "all"], "PSD†‡").ours() == "ceiling 0.800"
    assert "flowbench run psd --dataset articulated" not in t.missing
    v = tables.table1_visible(recs, load_methods())
    assert _cell(v, [title, "all"], "FlowCapsules").values == (0.4, 0.4)
    assert "flowbench run psd --dataset articulated" in v.missing
    # No record of the stand-in yet: no rows of it (the README's tables stay as they were).
    assert not any(row[0] == title for row, _ in _t1([_rec()]).rows)


def test_geo_plus_records_without_a_look_fill_camouflage_rows_never_the_papers():
    """Geo+ records made before geogen recorded looks were scored on the camouflage look: they
    fill "Geo+ (camouflage)" rows and columns with no paper number, never the Geo+ ones."""
    old = _rec(dataset="geo+", all_iou=0.6, visible=0.5, k4=0.4, look=None)
    camouflage = _rec(dataset="geo+", all_iou=0.62, seed=1, visible=0.5, look="camouflage")
    paper = _rec(dataset="geo+", all_iou=0.8, seed=2, look="paper")
    t1, t1b, t2, t3 = tables.build_tables([_rec(), old, camouflage])
    assert _cell(t1, ["Geo+ (camouflage)", "all"], "FlowCapsules").values == (0.6, 0.62)
    assert _cell(t1, ["Geo+ (camouflage)", "all"], "FlowCapsules").theirs() == ""
    assert _cell(t1, ["Geo+", "all"], "FlowCapsules").ours() == "-"
    assert _cell(t1, ["Geo+", "all"], "FlowCapsules").theirs() == "0.89"
    assert _cell(t1, ["Geo+", "all"], "PSD†‡").ours() == "ceiling: -"  # the camouflage's is not
    assert _cell(t1, ["Geo+ (camouflage)", "all"], "PSD†‡").ours() == "ceiling 0.832"
    assert _cell(t1b, ["Geo+ (camouflage)", "all"], "FlowCapsules").values == (0.5, 0.5)
    assert _cell(t2, ["FlowCapsules, k-means on raw capsule vectors"],
                 "Geo+ (camouflage) N=4").values == (0.4, 0.8)
    assert _cell(t3, ["K=8, |s|=27"], "Geo+ (camouflage)").values == (0.6, 0.62)
    assert _cell(t3, ["K=8, |s|=27"], "Geo+").values == ()
    assert "flowbench run flowcaps --dataset geo+" in t1.missing  # the paper's Geo+ is to run
    assert not any("camouflage" in c for t in (t1, t1b, t2, t3) for c in t.missing)
    assert any(n.startswith("Geo+ (camouflage): ") for n in t1.notes)
    # a record of the paper's look fills the Geo+ row; without camouflage records no such rows
    t1, _, t2, t3 = tables.build_tables([_rec(), paper])
    assert _cell(t1, ["Geo+", "all"], "FlowCapsules").values == (0.8,)
    assert all(r[0][0] != "Geo+ (camouflage)" for r in t1.rows)
    assert not any(c.startswith("Geo+ (camouflage)") for c in t2.columns + t3.columns)


def test_the_committed_geo_plus_records_are_labelled_camouflage(monkeypatch):
    from benchmark.records import COMMITTED, load_records, record_look
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    records, _ = load_records([COMMITTED])
    geo_plus = [r for r in records if r["dataset"] == "geo+"]
    before_looks = [r for r in geo_plus if "look" not in r["data"]]  # every one before 2026-12-08
    assert before_looks and {record_look(r) for r in before_looks} == {"camouflage"}
    assert {record_look(r) for r in geo_plus if "look" in r["data"]} <= {"paper"}
    t1 = tables.build_tables(records)[0]
    assert _cell(t1, ["Geo+", "all"], "FlowCapsules").ours() == "-"
    assert _cell(t1, ["Geo+ (camouflage)", "all"], "FlowCapsules").ours().startswith("0.698 ")

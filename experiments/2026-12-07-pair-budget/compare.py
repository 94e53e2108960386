"""Two runs of one config: their log rows (the columns both logs have, less the clock's:
seconds and pairs_per_s) and, given two records, their metrics.

    python compare.py LOG_A LOG_B [RECORD_A RECORD_B]

Prints how many rows the shorter log has, how many of them are equal, the first that differs,
and the largest difference of each loss column; for records, each metric side by side."""
import csv
import json
import sys

CLOCK = {"seconds", "pairs_per_s"}


def rows(path):
    return list(csv.DictReader(open(path)))


def compare_logs(a_path, b_path):
    a, b = rows(a_path), rows(b_path)
    cols = [c for c in a[0] if c in b[0] and c not in CLOCK]
    n = min(len(a), len(b))
    equal = sum(all(a[i][c] == b[i][c] for c in cols) for i in range(n))
    print(f"rows: {len(a)} and {len(b)}; compared {n} on {cols}; equal {equal}")
    for i in range(n):
        diff = [c for c in cols if a[i][c] != b[i][c]]
        if diff:
            print(f"first difference at row {i} (step {a[i]['step']}): "
                  + ", ".join(f"{c} {a[i][c]} / {b[i][c]}" for c in diff))
            break
    for c in cols:
        try:
            d = max(abs(float(a[i][c]) - float(b[i][c])) for i in range(n))
        except ValueError:
            continue
        print(f"  max |{c} difference| = {d:.3g}")


def compare_records(a_path, b_path):
    a, b = (json.load(open(p))["metrics"] for p in (a_path, b_path))
    for key in ("amodal_iou", "amodal_iou_per_image", "visible_iou", "visible_iou_per_image"):
        if key in a and key in b:
            print(key, {k: (round(a[key][k], 4), round(b[key][k], 4)) for k in a[key]})


if __name__ == "__main__":
    compare_logs(sys.argv[1], sys.argv[2])
    if len(sys.argv) == 5:
        compare_records(sys.argv[3], sys.argv[4])

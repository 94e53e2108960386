import numpy as np
import pytest

from benchmark import clustering


def test_majority_labels_hand_worked():
    table = np.array([[5, 2, 0, 0],
                      [4, 0, 0, 0],
                      [0, 0, 3, 0],
                      [0, 0, 0, 2]])
    # Two clusters may predict the same class (the paper's rule, also with N = 4).
    assert clustering.majority_labels(table).tolist() == [0, 0, 2, 3]
    with_empty = np.vstack([table, np.zeros((1, 4), int)])
    assert clustering.majority_labels(with_empty)[-1] == 0  # most common class overall


def test_standardise_uses_train_statistics_and_keeps_constants_finite():
    train = np.array([[0.0, 7.0], [2.0, 7.0]])
    test = np.array([[4.0, 7.0]])
    tr, te = clustering.standardise(train, test)
    assert tr[:, 0].tolist() == [-1.0, 1.0]
    assert te.tolist() == [[3.0, 0.0]]


def _blobs(rng, n_per, centres, labels):
    x = np.concatenate([c + 0.05 * rng.standard_normal((n_per, len(c))) for c in centres])
    y = np.repeat(labels, n_per)
    return x, y


def test_kmeans_accuracy_separable_blobs_and_fit_on_train():
    rng = np.random.default_rng(0)
    centres = np.eye(4) * 10
    train_x, train_y = _blobs(rng, 30, centres, [2, 0, 3, 1])
    test_x, test_y = _blobs(rng, 10, centres, [2, 0, 3, 1])
    for n in (4, 100):
        assert clustering.kmeans_accuracy(train_x, train_y, test_x, test_y, n, 0) == 1.0
    # Labels come from train: a test set whose labels disagree with train scores 0.
    wrong = (test_y + 1) % 4
    assert clustering.kmeans_accuracy(train_x, train_y, test_x, wrong, 4, 0) == 0.0


def test_kmeans_accuracy_merged_classes_is_bounded():
    rng = np.random.default_rng(1)
    # Classes 0 and 1 share a blob: at most one of them can be right with 4 clusters.
    centres = np.array([[0.0, 0], [0, 0], [10, 0], [0, 10]])
    train_x, train_y = _blobs(rng, 40, centres, [0, 1, 2, 3])
    test_x, test_y = _blobs(rng, 40, centres, [0, 1, 2, 3])
    acc = clustering.kmeans_accuracy(train_x, train_y, test_x, test_y, 4, 0)
    assert 0.5 <= acc <= 0.875


def test_classification_metrics_skips_100_clusters_on_tiny_data():
    rng = np.random.default_rng(2)
    x, y = _blobs(rng, 5, np.eye(4) * 10, [0, 1, 2, 3])
    out = clustering.classification_metrics(x, y, x, y, random_state=0)
    assert out["kmeans_4"] == 1.0 and out["kmeans_100"] is None
    assert out["kmeans_rule"] == "majority" and out["kmeans_standardised"] is True
    with pytest.raises(ValueError, match="at least"):
        clustering.kmeans_accuracy(x, y, x, y, 100, 0)


def test_four_clusters_on_three_blobs_follow_the_majority_rule():
    rng = np.random.default_rng(3)
    # Class 0 is two blobs; classes 1 and 2 share one. The majority rule gives both class-0
    # clusters class 0 (3/4 right); a one-to-one map would have to spend one on another class.
    centres = np.array([[0.0, 0], [20, 0], [0, 20], [0, 20]])
    train_x, train_y = _blobs(rng, 40, centres, [0, 0, 1, 2])
    test_x, test_y = _blobs(rng, 40, centres, [0, 0, 1, 2])
    acc = clustering.kmeans_accuracy(train_x, train_y, test_x, test_y, 4, 0)
    assert acc >= 0.74


def test_raw_features_keep_their_scale():
    # A wide, uninformative feature beside a narrow, informative one: standardising lets the
    # narrow one separate the classes, raw features let the wide one dominate.
    rng = np.random.default_rng(4)
    n = 200
    y = rng.integers(0, 2, n)
    x = np.stack([1000.0 * rng.standard_normal(n), y + 0.01 * rng.standard_normal(n)], 1)
    std = clustering.kmeans_accuracy(x[:100], y[:100], x[100:], y[100:], 4, 0)
    raw = clustering.kmeans_accuracy(x[:100], y[:100], x[100:], y[100:], 4, 0,
                                     standardised=False)
    assert std == 1.0 and raw < 0.8

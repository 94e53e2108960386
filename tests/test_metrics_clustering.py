import numpy as np
import pytest

from benchmark import clustering


def test_hungarian_and_majority_labels_hand_worked():
    table = np.array([[5, 2, 0, 0],
                      [4, 0, 0, 0],
                      [0, 0, 3, 0],
                      [0, 0, 0, 2]])
    # One-to-one: giving cluster 0 class 1 (2) and cluster 1 class 0 (4) beats 5 + 0.
    assert clustering.hungarian_labels(table).tolist() == [1, 0, 2, 3]
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
    with pytest.raises(ValueError, match="at least"):
        clustering.kmeans_accuracy(x, y, x, y, 100, 0)

"""Unsupervised classification: k-means on capsule feature vectors (paper, Table 2).

Letters: N samples, F feature size, C = 4 presence classes (geogen.schema.CLASSES).

Protocol (the paper's, the same for every method; `Prediction.features` says what a
method's vector is):
1. Unless the method says its features are clustered raw (`Method.standardise_features`,
   False for SCAE's object-capsule presences, which SCAE's protocol clusters as they
   are), standardise each feature with the mean and standard deviation of the train set
   (a constant feature is left at 0), so pose (pixel-like ranges) and shape codes weigh
   alike.
2. Fit sklearn KMeans with `n_clusters` and an explicit `random_state` on the train
   features only.
3. Each cluster predicts the most common class of its train members (an empty cluster
   the most common train class), for N = 4 as for N = 100: the paper's rule. Records
   made before this rule labelled the 4 clusters by a one-to-one map instead
   (`RULE` names the rule in each record's metrics; the tables mark the older ones).
4. Assign test samples to the nearest centre and report accuracy on the test set.
"""
from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans

from geogen.schema import CLASSES

N_INIT = 10  # k-means restarts; the best inertia is kept
RULE = "majority"  # how clusters are labelled; stored in the metrics as `kmeans_rule`


def contingency(clusters: np.ndarray, labels: np.ndarray, n_clusters: int,
                n_classes: int) -> np.ndarray:
    """(n_clusters, n_classes) counts of samples in each (cluster, class) pair."""
    table = np.zeros((n_clusters, n_classes), dtype=np.int64)
    np.add.at(table, (clusters, labels), 1)
    return table


def majority_labels(table: np.ndarray) -> np.ndarray:
    """Majority class of each cluster; empty clusters get the most common class."""
    out = table.argmax(1)
    empty = table.sum(1) == 0
    out[empty] = table.sum(0).argmax()
    return out


def standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre and scale both sets with the train statistics."""
    mean = train.mean(0)
    std = train.std(0)
    std = np.where(std > 1e-12, std, 1.0)  # constant features stay 0 after centring
    return (train - mean) / std, (test - mean) / std


def kmeans_accuracy(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray,
                    test_y: np.ndarray, n_clusters: int, random_state: int,
                    n_classes: int = len(CLASSES), standardised: bool = True) -> float:
    """Test accuracy of k-means clusters labelled on train (see module docstring).

    Args:
        train_x: (N_train, F) float features.  train_y: (N_train,) class ids.
        test_x: (N_test, F).  test_y: (N_test,).
        n_clusters: the number of clusters, each labelled by its train members' majority.
        standardised: whether features are standardised with the train statistics first.
    """
    if len(train_x) < n_clusters:
        raise ValueError(f"k-means with {n_clusters} clusters needs at least as many "
                         f"train samples, got {len(train_x)}")
    tr, te = train_x.astype(np.float64), test_x.astype(np.float64)
    if standardised:
        tr, te = standardise(tr, te)
    km = KMeans(n_clusters=n_clusters, n_init=N_INIT, random_state=random_state).fit(tr)
    table = contingency(km.labels_, train_y, n_clusters, n_classes)  # (n_clusters, C)
    pred = majority_labels(table)[km.predict(te)]  # (N_test,)
    return float((pred == test_y).mean())


def classification_metrics(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray,
                           test_y: np.ndarray, random_state: int,
                           standardised: bool = True) -> dict:
    """Table 2's two numbers, k-means accuracy with N = 4 and N = 100 clusters, with the rule
    and the feature scaling that made them."""
    out = {"kmeans_rule": RULE, "kmeans_standardised": standardised}
    for n in (4, 100):
        key = f"kmeans_{n}"
        # Too few train samples for 100 clusters happens only on tiny smoke data.
        out[key] = (kmeans_accuracy(train_x, train_y, test_x, test_y, n, random_state,
                                    standardised=standardised)
                    if len(train_x) >= n else None)
    return out

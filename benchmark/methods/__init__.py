"""Adapters that put each method behind the benchmark's protocol (benchmark.registry).

Importing this package registers every method: one explicit import per adapter module, so a new
baseline is registered by adding its line here (its model lives in `baselines/<name>/`).
"""
from benchmark.methods import flowcaps  # noqa: F401  (registers flowcaps, flowcaps-refine)
from benchmark.methods import psd  # noqa: F401  (registers psd)
from benchmark.methods import scae  # noqa: F401  (registers scae, flowscae)
from benchmark.methods import rnem  # noqa: F401  (registers rnem)
from benchmark.methods import motiongrouping  # noqa: F401  (registers motiongrouping)
from benchmark.methods import gwm  # noqa: F401  (registers gwm)
from benchmark.methods import kmeans_flow  # noqa: F401  (registers kmeans-flow, a calibration)

"""Fair-share arithmetic shared by the recommendations and the audit: the weighted
max-min split (water-filling) and Jain's fairness index. Plain numbers in and out."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

_EPS = 1e-9                 # slack for comparisons in floating point


def water_fill(total: float, weights: Sequence[float],
               caps: Sequence[float | None]) -> list[float]:
    """Split `total` in proportion to `weights`, no one getting more than its cap (None:
    no cap): what a capped participant cannot use is split again among the others, until
    everyone is capped or nothing is left. Participants with a zero weight or cap get 0.
    The result sums to min(total, sum of the caps of those with a weight)."""
    n = len(weights)
    cap = [math.inf if c is None else float(c) for c in caps]
    alloc = [0.0] * n
    live = [i for i in range(n) if weights[i] > 0 and cap[i] > 0]
    left = max(0.0, float(total))
    while live and left > _EPS:
        wsum = sum(weights[i] for i in live)
        offer = {i: left * weights[i] / wsum for i in live}
        full = [i for i in live if offer[i] >= cap[i] - alloc[i] - _EPS]
        if not full:
            for i in live:
                alloc[i] += offer[i]
            break
        for i in full:
            left -= cap[i] - alloc[i]
            alloc[i] = cap[i]
        live = [i for i in live if i not in full]
    return alloc


def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2) of the finite values: 1 when all are
    equal, 1/n when one has everything. NaN without values or when all are 0."""
    x = [float(v) for v in values if v is not None and math.isfinite(v)]
    sq = sum(v * v for v in x)
    return sum(x) ** 2 / (len(x) * sq) if x and sq > 0 else float("nan")

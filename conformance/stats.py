"""Helpers of the statistical (chi-square) tests shared by several concepts' specs."""
from __future__ import annotations


def lumped(observed, expected, min_expected: float = 5.0) -> tuple[list[float], list[float]]:
    """Merge the cells expecting fewer than ``min_expected`` draws (smallest first) until every
    cell expects at least that many -- the usual validity condition of Pearson's chi-square
    test. Returns (observed, expected) of the merged cells; totals are preserved."""
    cells = sorted(zip(expected, observed))
    out_e, out_o, acc_e, acc_o = [], [], 0.0, 0.0
    for e, o in cells:
        acc_e, acc_o = acc_e + e, acc_o + o
        if acc_e >= min_expected:
            out_e.append(acc_e)
            out_o.append(acc_o)
            acc_e = acc_o = 0.0
    if acc_e > 0 and out_e:
        out_e[-1] += acc_e
        out_o[-1] += acc_o
    return out_o, out_e

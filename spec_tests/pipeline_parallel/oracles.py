"""Independent oracles of pipeline parallelism: the schedules' orders written from their rules (not
from the reference's loops), and a step-timed simulation written as the longest path of the
schedule's dependency graph (exact fractions)."""
from __future__ import annotations

from fractions import Fraction


def gpipe_order(p: int, m: int, training: bool) -> list[list[tuple[str, int]]]:
    """Every forward, then (training) every backward, micro-batches in order."""
    steps = [("F", j) for j in range(m)] + ([("B", j) for j in range(m)] if training else [])
    return [list(steps) for _ in range(p)]


def one_f_one_b_order(p: int, m: int, training: bool) -> list[list[tuple[str, int]]]:
    """1F1B by its rule: stage s keeps at most min(p - s, m) micro-batches in flight (forwarded,
    not yet backwarded), runs a forward whenever that limit allows and a backward otherwise.
    Forward-only: the forwards in order."""
    if not training:
        return gpipe_order(p, m, False)
    out = []
    for s in range(p):
        limit, f, b, steps = min(p - s, m), 0, 0, []
        while b < m:
            if f < m and f - b < limit:
                steps.append(("F", f))
                f += 1
            else:
                steps.append(("B", b))
                b += 1
        out.append(steps)
    return out


def longest_path(schedule, tf, tb):
    """Start and end of every step as the longest path to it in the DAG whose edges are each
    stage's order and the data dependencies (F(s-1, j) -> F(s, j); B(s+1, j) -> B(s, j);
    F(s, j) -> B(s, j)); None when the graph has a cycle (the schedule deadlocks)."""
    p = len(schedule)
    dur = {}
    preds = {}
    for s, steps in enumerate(schedule):
        for i, (kind, j) in enumerate(steps):
            node = (kind, s, j)
            dur[node] = Fraction(tf[s] if kind == "F" else tb[s])
            ps = [(steps[i - 1][0], s, steps[i - 1][1])] if i else []
            if kind == "F" and s > 0:
                ps.append(("F", s - 1, j))
            if kind == "B":
                ps.append(("F", s, j))
                if s < p - 1:
                    ps.append(("B", s + 1, j))
            preds[node] = ps
    end, state = {}, {}

    def visit(node):                     # iterative DFS for the longest path, cycle detection
        stack = [(node, 0)]
        while stack:
            n, i = stack.pop()
            if i == 0:
                if state.get(n) == "done":
                    continue
                if state.get(n) == "open":
                    return False
                state[n] = "open"
            ps = preds[n]
            if i < len(ps):
                stack.append((n, i + 1))
                q = ps[i]
                if state.get(q) == "open":
                    return False
                if state.get(q) != "done":
                    stack.append((q, 0))
                continue
            end[n] = max([end[q] for q in ps], default=Fraction(0)) + dur[n]
            state[n] = "done"
        return True

    for node in preds:
        if not visit(node):
            return None
    return end

"""Every short stream of proposals (bounded-exhaustive exploration of the forcer).

The universe: the model proposes, at every step, either an ordinary token ``x`` (id 0) or the
end of thinking ``E`` (id 1); the forcer is run on every sequence of ``DEPTH`` proposals (6;
thorough: 8), all 2^DEPTH of them, for every budget of ``BUDGETS`` (56): ceilings None, 0, 1, 3;
floors 0 to 2 (at most the ceiling); Waits of one token (``W``, id 2) or two (``W``, ``w``, ids 2
and 3); max_waits None, 0, 1 with a floor (None without); answer prefixes () and (``A``, ``B``)
(ids 4, 5) with a ceiling (() without); the legal combinations (a Wait started below the floor
must fit under the ceiling). Proposing a Wait's or the prefix's ids is left to test_forcer.py (they
are ordinary tokens). After every step the token appended, whether it was forced and
``next_forced`` equal the oracle's (spec_tests/budget/model.py, the contract's rules as a
rewriting of the proposals); after each run every observable (phase, thinking_tokens, waits,
forced_end, num_tokens, next_forced) does (test_forcer.py compares them after every step of its
random runs: here the calls are kept few, each crosses the process boundary for a submission), and
each full run obeys the law as predicates (model.law_problems: the ceiling, the Waits only for a proposed
end below the floor, at most max_waits, the forced end followed by the answer prefix). Runs are
not merged by the state they reach (a wrong forcer need not be in the oracle's state); the
distinct oracle states reached (phase, thinking count, waits, forced end, forced tokens pending)
per budget are summed and pinned (``STATES``), so the exploration is the one stated.
"""
from __future__ import annotations

import itertools

from hypothesis import settings

from reference.budget import ThinkingBudget
from spec_tests.budget.model import OBSERVABLES, Oracle, law_problems, observe

X, E, W, W2, A, B = 0, 1, 2, 3, 4, 5


def budgets() -> list[ThinkingBudget]:
    out = []
    for ceiling in (None, 0, 1, 3):
        for floor in range(3):
            if ceiling is not None and floor > ceiling:
                continue
            for wait in ((W,), (W, W2)):
                if floor > 0 and ceiling is not None and floor + len(wait) - 1 > ceiling:
                    continue
                for max_waits in ((None, 0, 1) if floor else (None,)):
                    for prefix in (((),) if ceiling is None else ((), (A, B))):
                        out.append(ThinkingBudget(E, ceiling, floor, wait, max_waits, prefix))
    return out


BUDGETS = budgets()
# distinct oracle states reached, summed over BUDGETS (measured), per depth; thorough (8) reaches 714
STATES = {6: 622, 8: 714}


def depth() -> int:
    return 8 if settings.get_current_profile_name() == "thorough" else 6


def test_every_short_stream(impl):
    """Every proposal sequence over {x, E} of DEPTH steps, every budget of BUDGETS: each step as the
    oracle's, each run lawful."""
    Forcer = impl.get("BudgetForcer")
    n = depth()
    states = 0
    for budget in BUDGETS:
        seen = set()
        for proposals in itertools.product((X, E), repeat=n):
            forcer, oracle = Forcer(budget), Oracle.of(budget)
            got = observe(forcer)
            assert got == oracle.observe(), f"BudgetForcer({budget}) before any step: {OBSERVABLES} = {got}; expected {oracle.observe()}"
            appended, forced = [], []
            for i, p in enumerate(proposals):
                step = tuple(forcer.step(p))
                want = oracle.step(p)
                where = f"BudgetForcer({budget}), proposals {list(proposals[:i + 1])}"
                assert step == want, (f"{where}: step({p}) = {step}; the contract appends {want} (token, forced), "
                                      f"after {appended}")
                got, expected = forcer.next_forced, oracle.next_forced()
                assert got == expected, f"{where}: next_forced = {got!r}; expected {expected!r}"
                appended.append(step[0])
                forced.append(step[1])
                seen.add(oracle.state())
            got = observe(forcer)
            assert got == oracle.observe(), (f"BudgetForcer({budget}), proposals {list(proposals)}: {OBSERVABLES} = "
                                             f"{got}; expected {oracle.observe()}")
            problems = law_problems(budget, list(proposals), appended, forced)
            assert not problems, f"BudgetForcer({budget}) on proposals {list(proposals)} appended {appended}: {problems}"
        states += len(seen)
    pinned = STATES.get(n)
    assert pinned is None or states == pinned, f"{states} distinct states over {len(BUDGETS)} budgets; pinned {pinned}"

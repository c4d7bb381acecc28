"""Planted bugs of `cost_per_task` (each must make a test fail): the slips of 08.12's arithmetic."""
from conformance.declarations import Patch

MUTANTS = [
    Patch("attempts_off_by_one", "Unbounded retry's mean attempts as (1 - p) / p: the failures before the "
          "success, not the attempts (the geometric mean 1/p off by one).",
          "        return 1.0 / p\n", "        return (1.0 - p) / p\n"),
    Patch("pass_at_k_linear", "pass@k as k x p (capped at 1): adds the chances instead of 1 - (1 - p)^k.",
          "    return 1.0 - (1.0 - p) ** k\n", "    return min(1.0, k * p)\n"),
    Patch("per_thousand", "Prices per thousand tokens under the per-million name.",
          "TOKENS_PER_MILLION = 1_000_000\n", "TOKENS_PER_MILLION = 1_000\n"),
    Patch("retry_pays_all_k", "Capped retry pays all k attempts, as if it never stopped at a success.",
          "    return (1.0 - (1.0 - p) ** k) / p\n", "    return float(k)\n"),
    Patch("best_of_n_pays_one", "Best-of-n charged one attempt per task: the n - 1 parallel samples are free.",
          "    return n * c / pass_at_k(p, n)\n", "    return c / pass_at_k(p, n)\n"),
    Patch("retry_counts_attempted", "Capped retry's cost per attempted task, not per solved task "
          "(the unsolved tasks' cost is not spread over the solved ones).",
          "    solved = 1.0 if max_attempts is None else pass_at_k(p, max_attempts)\n", "    solved = 1.0\n"),
]

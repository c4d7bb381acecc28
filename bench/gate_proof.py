"""Proof of the regression gate on the GPU (bench/gate.py), in one run (< 2 min):

  0. this machine's baseline is recorded first (gate.record_baseline: 3 runs of every gate shape,
     median ratio; $OUT/gate_baseline_<kernel>.json): a record from another session is not a stable
     baseline (the peer itself drifts > 8 %; gate.py's module doc), and is only compared with
     for information;
  1. the shipped FlashAttention forward passes the gate on every forward gate shape, three runs
     out of three (each run: every shape measured afresh, 3 alternating rounds);
  2. a planted slowdown of the kernel fails it on every shape: ``tile`` = a deliberately worse
     tile config (gate.SLOW_FWD_CONFIG, passed to the launch here, never set in the kernel's
     defaults) and ``extra10`` = the same kernel doing ~10 % more work per call;
  3. for each plant, the measured slowdown of our time against the shipped kernel in the same run
     (so the plant's size is known, not assumed).

    python -m bench.gate_proof --out $OUT/gate_proof.json      # also $OUT/gate_baseline_attention.json
    python -m bench.gate_proof --slow tile                     # one planted run only
    python -m bench.gate_proof --kernel paged_decode           # issue 27's public paths: also
    python -m bench.gate_proof --kernel verify                 # verify and sampler (plant: extra10
    python -m bench.gate_proof --kernel sampler                # = a second plan over ~10 % of the batch)
Exit status 0 iff the shipped kernel passed 3/3, every plant failed, and every shape a plant
slowed by >= 10 % (measured) is among its failures.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from bench import gate

SHAPES = [s for s in gate.ATTENTION_GATE_SHAPES if s[0] == "fwd"]
PLANTS = {"attention": ["tile", "extra10"], **{k: ["extra10"] for k in gate.PUBLIC_GATES}}


def measure_all(kernel: str, slow: str | None) -> dict:
    """One measurement of every gate shape of ``kernel`` (with the plant ``slow`` in ours)."""
    if kernel == "attention":
        ms = [gate.measure_attention(*shape, slow=slow) for shape in SHAPES]
    else:
        ms = [gate.measure_public(kernel, c.name, slow=slow) for c in gate.public_cases(kernel)]
    return {m.shape: m for m in ms}


def one_run(slow: str | None, recorded, kernel: str = "attention") -> dict:
    measured = measure_all(kernel, slow)
    rep = gate.check(measured, recorded)
    print(rep.explain(), flush=True)
    return dict(slow=slow, passed=rep.ok, explanation=rep.explain(),
                measured={k: dict(ours_ms=v.ours_ms, peer=v.peer, peer_ms=v.peer_ms, ratio=v.value)
                          for k, v in measured.items()})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", choices=["attention", *gate.PUBLIC_GATES], default="attention",
                    help="attention (the kernel's own gate shapes) or a public plan/run path of issue 27")
    ap.add_argument("--slow", choices=["tile", "extra10"], action="append", default=None,
                    help="the planted slowdowns to run (default: the kernel's, PLANTS)")
    ap.add_argument("--shipped-runs", type=int, default=3)
    ap.add_argument("--baseline-runs", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.kernel != "attention" and args.slow and "tile" in args.slow:
        ap.error("--slow tile plants a tile config of the attention kernel only")
    import torch
    t0 = time.perf_counter()
    kernel = args.kernel
    docs_record = gate.recorded_attention(gate.RESULTS / "attention_h200.json") if kernel == "attention" else None
    base_path = os.path.join(os.environ.get("OUT", "."), f"gate_baseline_{kernel}.json")
    gate.record_baseline(args.baseline_runs, base_path, kernels=(kernel,))   # this machine's baseline, first
    os.environ["INFERSPEC_GATE_BASELINE"] = base_path
    recorded = gate.recorded_attention() if kernel == "attention" else gate.recorded_public(kernel)
    print("baseline recorded on this machine:", base_path, flush=True)
    info = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, factor=gate.FACTOR,
                kernel=kernel, shapes=sorted(recorded), cmd=" ".join(["python -m bench.gate_proof"] + sys.argv[1:]))
    print(json.dumps(info), flush=True)
    shipped = [one_run(None, recorded, kernel) for _ in range(args.shipped_runs)]
    planted = [one_run(s, recorded, kernel) for s in (args.slow or PLANTS[kernel])]
    for pr in planted:                  # the plant's size, measured against the shipped runs
        pr["slowdown_vs_shipped"] = {
            k: v["ours_ms"] / min(r["measured"][k]["ours_ms"] for r in shipped) - 1
            for k, v in pr["measured"].items()}
        # every shape the plant slowed by >= 10 % must be a FAIL line of its report
        pr["missed_10pct_shapes"] = [k for k, v in pr["slowdown_vs_shipped"].items()
                                     if v >= 0.10 and f"  {k}:" not in "".join(
                                         ln for ln in pr["explanation"].splitlines(True) if "[FAIL]" in ln)]
    cross = None
    if docs_record is not None:
        cross = gate.check({k: gate.Ratio(k, v["ours_ms"], v["peer"], v["peer_ms"])
                            for k, v in shipped[0]["measured"].items()}, docs_record)
        print("cross-session (informational): shipped run 1 against docs/results/attention_h200.json\n"
              + cross.explain(), flush=True)
    ok = (all(r["passed"] for r in shipped) and not any(r["passed"] for r in planted)
          and not any(r["missed_10pct_shapes"] for r in planted))
    summary = dict(shipped_passed=f"{sum(r['passed'] for r in shipped)}/{len(shipped)}",
                   planted={r["slow"]: dict(passed=r["passed"], slowdown_vs_shipped={
                       k: round(v, 3) for k, v in r["slowdown_vs_shipped"].items()}) for r in planted},
                   missed_10pct_shapes={r["slow"]: r["missed_10pct_shapes"] for r in planted},
                   cross_session_vs_docs=dict(passed=cross.ok, explanation=cross.explain()) if cross else None,
                   baseline=json.load(open(base_path)),
                   gate_proved=ok, wall_s=round(time.perf_counter() - t0, 1))
    print(json.dumps(summary, indent=1))
    payload = dict(info=info, summary=summary, shipped=shipped, planted=planted)
    paths = [args.out] if args.out else []
    if os.environ.get("OUT"):
        paths.append(os.path.join(os.environ["OUT"], f"gate_proof_{kernel}.json"))
    for path in paths:
        with open(path, "w") as f:
            json.dump(payload, f, indent=1)
        print("wrote", path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

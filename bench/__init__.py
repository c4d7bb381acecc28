"""inferspec's measurements, kept apart from the specification (spec_tests/): what is fast, not
what is correct.

    bench/timing.py      the one timing helper (CUDA events or perf_counter, warm-up, repeats)
    bench/runner.py      ``python -m bench run --concept X --out results.json``: runs the cases
                         of a concept and writes one JSON file (device, versions, the command line,
                         every case's numbers); ``python -m bench list`` shows the cases
    bench/cases/X.py     concept X's benchmark cases, as data (shapes, dtypes, providers, metric)
    bench/floors.py      the speedup floors the benchmark tests assert
    bench/gate.py        the GPU regression gate (ratios to the best peer, per shape)
    bench/gate_proof.py  shows on the GPU that the gate fails planted slowdowns
    bench/plots.py       the figures of docs/img/, from the runner's JSON
    bench/tests/         pytest-benchmark tests and the floors (collected by the default pytest run)

docs/performance.md has the GPU numbers and docs/results/README.md the command behind every file
of results.
"""

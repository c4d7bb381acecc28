"""``python -m bench run --concept X [--out results.json]`` (bench/runner.py)."""
import sys

from bench.runner import main

sys.exit(main())

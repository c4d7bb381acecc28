"""Percentile rank computed as n * q / 100 instead of (n - 1) * q / 100 (an off-by-one between
1-based ranks and 0-based indices): p50 of [1, 2, 3, 4] is 3 instead of 2.5."""
import inspect

import reference.metrics as _ref

TARGET = "metrics"

_src = inspect.getsource(_ref)
_bug = _src.replace("h = (len(v) - 1) * q / 100.0", "h = len(v) * q / 100.0")
assert _bug != _src, "the reference changed: update this mutant"
exec(compile(_bug, __file__, "exec"), globals())

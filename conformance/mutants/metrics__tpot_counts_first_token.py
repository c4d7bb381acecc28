"""TPOT computed as end-to-end latency over all output tokens, (t[n-1] - arrival) / n: the first
token's wait (TTFT, the prefill) leaks into the per-token decode time."""
import inspect

import reference.metrics as _ref

TARGET = "metrics"

_src = inspect.getsource(_ref)
_bug = _src.replace("tpot = (last - first) / (n - 1) if n > 1 else None",
                    "tpot = (last - arrival) / n if n > 1 else None")
assert _bug != _src, "the reference changed: update this mutant"
exec(compile(_bug, __file__, "exec"), globals())

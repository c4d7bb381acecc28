"""Goodput that counts a request meeting EITHER SLO (TTFT or TPOT) instead of both."""
import inspect

import reference.metrics as _ref

TARGET = "metrics"

_src = inspect.getsource(_ref)
_bug = _src.replace("return ttft_ok and tpot_ok", "return ttft_ok or tpot_ok")
assert _bug != _src, "the reference changed: update this mutant"
exec(compile(_bug, __file__, "exec"), globals())

"""The final text is cut at the end of the matched stop string even when stop strings are to be
excluded (include_stop_str_in_output=False): the client sees the stop string."""
from optimized.stopping import StopChecker as _Fast, StopParams  # noqa: F401

TARGET = "stopping"


class StopChecker(_Fast):
    def _cut(self, start, s):
        return start + len(s)  # bug: ignores include_stop_str_in_output

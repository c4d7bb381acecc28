"""A stream that holds back only a partial stop string lying inside the newest token's text: when
a stop string's beginning arrived in an earlier token and the new token continues it ("a", then
"b" of the stop string "abc"), the partial match is emitted although it may still complete."""
from optimized.stopping import StopChecker as _Fast, StopParams  # noqa: F401

TARGET = "stopping"


class StopChecker(_Fast):
    def _held_back(self, window, base):
        new = window[base:]  # bug: the suffix may start in the old text
        for size in range(min(self._keep, len(new)), 0, -1):
            if new[len(new) - size:] in self._prefixes:
                return size
        return 0

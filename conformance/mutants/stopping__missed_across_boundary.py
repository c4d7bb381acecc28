"""A stop-string matcher that searches only the text the new token added: an occurrence that
begins in an earlier token ("Hel" + "lo wor" with stop "o w") is never found, so generation runs
on and streams the stop string."""
from optimized.stopping import StopChecker as _Fast, StopParams  # noqa: F401

TARGET = "stopping"


class StopChecker(_Fast):
    def _match(self, window, base):
        best = None
        for s in self._stop:
            start = window.find(s, base)  # bug: should start len(s) - 1 characters earlier
            if start != -1 and (best is None or (start + len(s), -len(s)) < best[0]):
                best = ((start + len(s), -len(s)), start, s)
        return None if best is None else best[1:]

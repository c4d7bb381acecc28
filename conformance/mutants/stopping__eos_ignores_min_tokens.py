"""EOS ends generation even before min_tokens tokens were generated (min_tokens is applied to stop
strings and stop token ids, but the EOS check comes first and forgets it)."""
from reference.stopping import StopChecker as _Ref, StopParams  # noqa: F401

TARGET = "stopping"


class StopChecker(_Ref):
    def append(self, token_id):
        p = self.params
        if (not self.finished and token_id == p.eos_token_id and not p.ignore_eos
                and token_id in self._vocab):
            return self._finish(self.num_tokens + 1, self.text, "stop", None)  # bug: no n > min_tokens
        return super().append(token_id)

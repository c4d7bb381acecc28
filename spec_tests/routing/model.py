"""A brute-force model of a router, for the laws (independent of reference/routing.py).

It keeps what the contract makes observable -- each replica's load, the prompts routed to it, the
round-robin turn, the session table -- and answers "which replicas may the policy take" by brute
force over the replicas: a replica's cached prefix of a prompt (unbounded cache) is the longest
common prefix of ``prompt[:-1]`` with any prompt routed there, cut to whole blocks.
"""
from __future__ import annotations


def common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class Model:
    def __init__(self, num_replicas: int, policy: str, block_size: int, load_cap):
        self.n, self.policy, self.block, self.cap = num_replicas, policy, block_size, load_cap
        self.loads = [0] * num_replicas
        self.routed: list[list[tuple]] = [[] for _ in range(num_replicas)]
        self.turn = 0
        self.sessions: dict = {}
        self.in_flight: dict = {}

    def cached_prefix(self, r: int, prompt) -> int:
        """Tokens of ``prompt`` (never its last) replica ``r``'s unbounded cache serves."""
        key = tuple(prompt[:-1])
        m = max((common_prefix(p, key) for p in self.routed[r]), default=0)
        return m - m % self.block

    def allowed(self) -> list[int]:
        low = min(self.loads)
        return [r for r in range(self.n) if self.cap is None or self.loads[r] - low <= self.cap]

    def least_loaded(self) -> int:
        low = min(self.loads)
        return next(r for r in range(self.n) if self.loads[r] == low)

    def check_choice(self, got: int, prompt, session, where: str, bounded: bool = False) -> None:
        """Assert the policy's law for a route that returned ``got`` (before ``record``); with
        ``bounded`` caches (eviction decides what is cached) cache-aware's prefix is not checked here."""
        assert isinstance(got, int) and 0 <= got < self.n, f"{where} returned {got!r}: not a replica index in [0, {self.n})"
        loads = self.loads
        if self.policy == "round_robin":
            assert got == self.turn % self.n, (f"{where} -> replica {got}; round-robin's call number {self.turn} "
                                               f"(from 0, rejected calls not counted) goes to {self.turn % self.n}")
        elif self.policy == "least_loaded":
            assert loads[got] == min(loads), f"{where} -> replica {got} of load {loads[got]}; loads {loads}: not least loaded"
            assert got == self.least_loaded(), f"{where} -> replica {got}; loads {loads}: a tie goes to the lowest index"
        elif self.policy == "session_affinity":
            home = self.sessions.get(session) if session is not None else None
            if home is not None and home in self.allowed():
                assert got == home, (f"{where} -> replica {got}; session {session!r} lives on replica {home}, "
                                     f"loads {loads}, load_cap {self.cap}: it must stay")
            else:
                why = "a new session" if home is None else f"its replica {home} is over the load cap {self.cap}"
                assert got == self.least_loaded(), (f"{where} -> replica {got}; {why}, loads {loads}: it goes to "
                                                    f"the least-loaded replica {self.least_loaded()}")
        else:
            allowed = self.allowed()
            assert got in allowed, (f"{where} -> replica {got} of load {loads[got]}; loads {loads}, load_cap "
                                    f"{self.cap}: the cap allows only {allowed}")
            if bounded:
                return
            match = {r: self.cached_prefix(r, prompt) for r in allowed}
            best = max(match.values())
            assert match[got] == best, (f"{where} -> replica {got} caching {match[got]} tokens of the prompt; "
                                        f"replicas the cap allows cache {match}: it must take a longest")
            want = min((r for r in allowed if match[r] == best), key=lambda r: (loads[r], r))
            assert got == want, (f"{where} -> replica {got}; among the longest matches {[r for r in allowed if match[r] == best]} "
                                 f"(loads {loads}) the tie goes to the smaller load, then the lowest index: {want}")

    def record(self, request_id, r: int, prompt, session) -> None:
        self.turn += 1
        if self.policy == "session_affinity" and session is not None:
            self.sessions[session] = r
        self.routed[r].append(tuple(prompt))
        self.loads[r] += 1
        self.in_flight[request_id] = r

    def complete(self, request_id) -> int:
        r = self.in_flight.pop(request_id)
        self.loads[r] -= 1
        return r

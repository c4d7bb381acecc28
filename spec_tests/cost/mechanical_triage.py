"""Surviving mechanical variants of reference/cost.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change)."""

_WHY = ("_per_million's first two arguments (price, num_gpus) only meet in price * num_gpus: float "
        "multiplication is commutative, bit for bit, so swapping them changes no result")

TRIAGE = {
    ("reference", "return _per_million(price, gpus, rate, u)",
     "_per_million(a, b, ...) -> _per_million(b, a, ...)"): ("equivalent", _WHY),
    ("reference", "return (_per_million(price, gpus, prefill, u), _per_million(price, gpus, decode, u))",
     "_per_million(a, b, ...) -> _per_million(b, a, ...)"): ("equivalent", _WHY),
    ("reference", "return (_per_million(price, gpus, prefill, u), _per_million(price, gpus, decode, u))",
     "_per_million(a, b, ...) -> _per_million(b, a, ...) (#2)"): ("equivalent", _WHY),
}

"""Disaggregated prefill and decode: a KV hand-off between workers (course 04.07, 04.08; ch 10).

Prefill is compute-bound (a whole prompt per forward pass), decode is memory-bound (one token per
sequence per pass, reading the whole cache). Colocated on one GPU they interfere: a long prefill
stalls every decode in the batch. Disaggregation (DistServe, Splitwise, Mooncake) runs them on
different workers: the prefill worker runs the prompt, then ships the request's KV cache to a
decode worker, which continues decoding as if it had prefilled itself.

    prefill worker (rank 0)                              decode worker (rank r)
    cache, logits = model(prompt)                        header = recv()
    first = argmax(logits[-1])                           check header against own model
    send(header) ---------------------------------------> send(accept | reject)
    recv(accept) <---------------------------------------
    send(K), send(V)  (filled positions only) ----------> recv(K), recv(V) into a new cache
    recv(ack) <------------------------------------------ send(ack);  decode from `first`

**The bytes moved.** The payload is every layer's K and V for the prompt's ``n`` positions -- only
the filled positions, never the whole ``max_seq_len`` buffer::

    transfer_bytes = 2 x layers x kv_heads x head_dim x n x element_bytes

the KV-bytes formula of ``reference/kv_bytes.py`` for one sequence of ``n`` tokens. A Llama-3-8B
shape (32 layers, 8 KV heads, head_dim 128, bf16) moves 128 KiB per token: 512 MiB for a 4K
prompt. The control messages (header, accept, ack: int64 tensors of a few words) are not payload
and are not counted; the payload tensors are the only floating-point tensors a hand-off sends.

**The protocol** (torch.distributed point-to-point: ``isend``/``irecv`` and ``wait``, gloo between
processes on one CPU machine, NCCL where the tensors live on GPUs -- the same code). Messages, in
order, on the process group of the (prefill, decode) pair:

1. header, prefill -> decode: int64 ``[VERSION, request_id, n_tokens, layers, kv_heads, head_dim,
   dtype code, first_token, max_new_tokens]`` (:class:`KVHeader`). A STOP header (request_id -1,
   n_tokens 0) ends the decode worker's loop.
2. accept, decode -> prefill: int64 ``[request_id, ACCEPT]``, or ``[request_id, REJECT + i]``
   when field ``FIELDS[i]`` of the header does not match the decode worker's own model (layers,
   kv_heads, head_dim, dtype, positions past its max_seq_len); the request is then reported
   failed with a reason naming that field.
3. K then V, prefill -> decode: each (layers, kv_heads, n_tokens, head_dim), contiguous, in the
   model's dtype, bit for bit the prefill cache's first ``n_tokens`` positions.
4. ack, decode -> prefill: int64 ``[request_id, ACK]``. The ack transfers ownership: from then on
   the decode worker owns the request.

**Failure contract** (what a caller sees). :func:`prefill_worker` returns one :class:`Handoff`
per submitted request, its ``status`` either ``"handed_off"`` (exactly one decode worker
acknowledged it, ``decode_rank`` names it) or ``"failed"`` (``error`` says why); never a request
without a status. A hand-off attempt fails when any of its sends or receives raises (gloo reports
a dead peer as a closed connection) or does not complete within ``timeout`` seconds (a hung
peer), or when an accept or ack carries another request id or the wrong code. A failed attempt
marks that decode rank dead (never used again by this worker: its message stream may be out of
step) and the request is retried on the next live decode rank, each rank at most once; when no
live rank is left the request is ``"failed"``. A rejected header is not the worker's fault: the
request fails at once (every decode worker has the same model), the worker stays live.
:func:`decode_worker` returns the completions of the requests it acknowledged. So every submitted
request is in exactly one of {completed by a decode worker that stayed up, failed}: a request is
lost only if a decode worker dies *after* its ack, which this hand-off does not cover (the ack
is the hand-over of responsibility; re-running after that is the job of a request-level retry).

**Colocated vs disaggregated.** :func:`run_colocated` is prefill then decode in one process, the
cache handed over in memory. Both paths run the same functions (:func:`prefill`, :func:`greedy_decode`)
on the same model; the hand-off copies the KV bit for bit, the decode worker's cache has the
colocated cache's shape (``n + max_new_tokens - 1`` positions, as ``generate`` allocates), so a
decode after the hand-off gives the colocated tokens and logits bit for bit on one machine.

Decoding is greedy (argmax; exact ties to the lowest id); the first token is sampled by the
prefill worker from the prompt's last logits (it travels in the header), the others by the
decode worker.

Choices the law leaves open (the reference's): the message order and the header's layout above;
K and V as one tensor each over all layers (not one per layer); round-robin choice of the
first decode rank (request i starts at ``decode_ranks[i % len]``, then the next live ones in
order); a rejected header fails the request without retry.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from reference._checks import check_int, check_real, check_tensor
from reference.kv_bytes import KVCache, kv_cache_bytes

__all__ = ["transfer_bytes", "pack_kv", "unpack_kv", "prefill", "greedy_decode",
           "run_colocated", "prefill_worker", "decode_worker"]
__optional__ = []
# Request and KVHeader are vocabulary (spec_tests/disagg/__init__.py): plain data types a submission
# imports from here, so that the tests' requests and headers are the ones its workers receive.

VERSION = 1
ACCEPT, ACK, REJECT = 1, 2, 10   # a reject is REJECT + the index of the field in FIELDS
DTYPE_CODES = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2, torch.float64: 3}
CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}


# --- the request and the header ---------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One request: ``request_id`` an int >= 0, ``prompt`` a non-empty sequence of token ids,
    ``max_new_tokens`` an int >= 1 (the first is produced by the prefill worker). Bad values raise
    TypeError/ValueError naming the field."""

    request_id: int
    prompt: tuple
    max_new_tokens: int

    def __post_init__(self):
        check_int("request_id", self.request_id, minimum=0)
        if isinstance(self.prompt, torch.Tensor):
            object.__setattr__(self, "prompt", tuple(int(t) for t in self.prompt.reshape(-1)))
        if not isinstance(self.prompt, (list, tuple)):
            raise TypeError(f"prompt must be a sequence of token ids, got {type(self.prompt).__name__}")
        object.__setattr__(self, "prompt", tuple(check_int("prompt", t, minimum=0) for t in self.prompt))
        if not self.prompt:
            raise ValueError("prompt must hold at least one token (n_tokens >= 1)")
        check_int("max_new_tokens", self.max_new_tokens, minimum=1)


@dataclass(frozen=True)
class KVHeader:
    """What precedes a hand-off's payload: the request, the number of positions and the payload's
    shape and dtype, plus the first token (sampled by the prefill worker) and how many tokens to
    generate in all. ``n_tokens`` >= 1 and every size >= 1, ``request_id`` and ``first_token``
    >= 0, ``max_new_tokens`` >= 1, ``dtype`` one of float16/bfloat16/float32/float64: else
    TypeError/ValueError naming the field. ``encode()`` gives the int64 message, ``decode(t)``
    reads one back (a wrong length, version or dtype code: ValueError naming ``header``)."""

    request_id: int
    n_tokens: int
    layers: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype
    first_token: int
    max_new_tokens: int

    def __post_init__(self):
        check_int("request_id", self.request_id, minimum=0)
        for name in ("n_tokens", "layers", "kv_heads", "head_dim", "max_new_tokens"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("first_token", self.first_token, minimum=0)
        if self.dtype not in DTYPE_CODES:
            raise TypeError(f"dtype must be one of {tuple(DTYPE_CODES)}, got {self.dtype!r}")

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The shape of the K (and of the V) payload tensor."""
        return (self.layers, self.kv_heads, self.n_tokens, self.head_dim)

    def encode(self) -> torch.Tensor:
        return torch.tensor([VERSION, self.request_id, self.n_tokens, self.layers, self.kv_heads,
                             self.head_dim, DTYPE_CODES[self.dtype], self.first_token,
                             self.max_new_tokens], dtype=torch.int64)

    @staticmethod
    def decode(message: torch.Tensor) -> "KVHeader":
        values = [int(x) for x in message.reshape(-1)]
        if len(values) != HEADER_LEN or values[0] != VERSION:
            raise ValueError(f"header: not a version-{VERSION} header of {HEADER_LEN} words: {values}")
        if values[6] not in CODE_DTYPES:
            raise ValueError(f"header: unknown dtype code {values[6]}")
        return KVHeader(values[1], values[2], values[3], values[4], values[5], CODE_DTYPES[values[6]],
                        values[7], values[8])


HEADER_LEN = 9
STOP = torch.tensor([VERSION, -1, 0, 0, 0, 0, 0, 0, 0], dtype=torch.int64)


def transfer_bytes(config, n_tokens: int, dtype: torch.dtype | None = None) -> int:
    """Bytes of the KV payload a hand-off of ``n_tokens`` positions moves:
    ``2 x config.n_layers x config.n_kv_heads x config.head_dim x n_tokens x element_bytes(dtype)``
    = ``kv_bytes.kv_cache_bytes`` of one sequence of ``n_tokens`` tokens. ``dtype`` defaults to
    ``config.dtype``. The control messages (header, accept, ack) are not counted. ``n_tokens`` an
    int >= 1 (a hand-off carries at least one position), else TypeError/ValueError naming it; a
    ``dtype`` that is not a float dtype: TypeError naming ``dtype``."""
    check_int("n_tokens", n_tokens, minimum=1)
    dtype = config.dtype if dtype is None else dtype
    if dtype not in DTYPE_CODES:
        raise TypeError(f"dtype must be one of {tuple(DTYPE_CODES)}, got {dtype!r}")
    return kv_cache_bytes(layers=config.n_layers, kv_heads=config.n_kv_heads, head_dim=config.head_dim,
                          seq_len=n_tokens, batch=1, dtype=dtype)


# --- the payload ------------------------------------------------------------------------------
def pack_kv(cache: KVCache) -> tuple[torch.Tensor, torch.Tensor]:
    """The payload of a one-sequence cache: K and V of its filled positions, each
    (layers, kv_heads, seq_len, head_dim), contiguous copies (bit for bit the cache's values).
    A cache of another batch than 1 or with no position filled: ValueError naming ``cache``."""
    if not isinstance(getattr(cache, "k", None), torch.Tensor) or cache.k.dim() != 5:
        raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
    if cache.k.shape[1] != 1 or cache.seq_len < 1:
        raise ValueError(f"cache must hold one sequence with at least one position, got batch "
                         f"{cache.k.shape[1]} and seq_len {cache.seq_len}")
    n = cache.seq_len
    return cache.k[:, 0, :, :n].contiguous(), cache.v[:, 0, :, :n].contiguous()


FIELDS = ("layers", "kv_heads", "head_dim", "dtype", "max_seq_len")   # what a REJECT names


def check_header(model, header: KVHeader) -> None:
    """ValueError naming the first field of ``header`` that does not fit ``model`` (layers,
    kv_heads, head_dim, dtype, or n_tokens + max_new_tokens - 1 past its max_seq_len)."""
    c = model.config
    for name, want in zip(FIELDS, (c.n_layers, c.n_kv_heads, c.head_dim, model.dtype)):
        if getattr(header, name) != want:
            raise ValueError(f"header: {name} = {getattr(header, name)} does not match the decode model's {want}")
    if header.n_tokens + header.max_new_tokens - 1 > c.max_seq_len:
        raise ValueError(f"header: n_tokens ({header.n_tokens}) + max_new_tokens ({header.max_new_tokens}) - 1 "
                         f"exceeds the decode model's max_seq_len={c.max_seq_len}")


def unpack_kv(model, header: KVHeader, k: torch.Tensor, v: torch.Tensor) -> KVCache:
    """A new cache of ``model`` holding the received payload: ``model.new_cache(1, n_tokens +
    max_new_tokens - 1)`` (the colocated cache's shape) with ``k``/``v`` written at positions
    0..n_tokens-1 of every layer, so its ``seq_len`` is ``n_tokens`` (the next position's RoPE
    angle continues from there). Bad input, nothing allocated: a header that does not match the
    model (ValueError naming the field: layers, kv_heads, head_dim, dtype, n_tokens), ``k``/``v``
    not tensors (TypeError) or not of the header's shape and dtype (ValueError naming them)."""
    if not all(hasattr(header, f) for f in ("shape", "n_tokens", "layers", "dtype", "max_new_tokens")):
        raise TypeError(f"header must be a KVHeader, got {type(header).__name__}")
    check_header(model, header)
    for name, t in (("k", k), ("v", v)):
        check_tensor(name, t)
        if tuple(t.shape) != header.shape or t.dtype != header.dtype:
            raise ValueError(f"{name} must be {header.shape} {header.dtype} as the header says, "
                             f"got {tuple(t.shape)} {t.dtype}")
    cache = model.new_cache(1, header.n_tokens + header.max_new_tokens - 1)
    for layer in range(header.layers):
        cache.append(layer, k[layer][None].to(cache.k.device), v[layer][None].to(cache.v.device))
    return cache


def _is_request(obj) -> bool:
    """A Request by what it has (the tests' Request is the reference's vocabulary type; an
    implementation's own copy of the class must accept it)."""
    return all(hasattr(obj, f) for f in ("request_id", "prompt", "max_new_tokens"))


# --- the two halves of generation ---------------------------------------------------------------
@torch.no_grad()
def prefill(model, request: Request) -> tuple[KVCache, int, torch.Tensor]:
    """Run the prompt through ``model`` in one forward pass into a new cache of
    ``len(prompt) + max_new_tokens - 1`` positions; return ``(cache, first_token, first_logits)``:
    the greedy first token and the logits (vocab,) it was chosen from. A request whose positions
    exceed the model's ``max_seq_len``: ValueError naming ``max_new_tokens``."""
    if not _is_request(request):
        raise TypeError(f"request must be a Request, got {type(request).__name__}")
    n = len(request.prompt)
    if n + request.max_new_tokens - 1 > model.config.max_seq_len:
        raise ValueError(f"max_new_tokens: prompt ({n}) + max_new_tokens ({request.max_new_tokens}) - 1 "
                         f"exceeds the model's max_seq_len={model.config.max_seq_len}")
    cache = model.new_cache(1, n + request.max_new_tokens - 1)
    tokens = torch.tensor([request.prompt], dtype=torch.long, device=model.device)
    logits = model(tokens, cache=cache)[0, -1]
    return cache, int(logits.argmax()), logits


@torch.no_grad()
def greedy_decode(model, cache: KVCache, first_token: int, max_new_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding from ``cache`` (which holds the prompt) after ``first_token``: feeds it and
    each next token, ``max_new_tokens - 1`` forward passes. Returns ``(tokens, logits)``: all
    ``max_new_tokens`` tokens, int64 (``first_token`` first), and the (max_new_tokens - 1, vocab)
    logits of tokens 1.. (the first token's logits are the prefill's)."""
    check_int("first_token", first_token, minimum=0)
    check_int("max_new_tokens", max_new_tokens, minimum=1)
    tokens, all_logits, token = [first_token], [], first_token
    for _ in range(max_new_tokens - 1):
        logits = model(torch.tensor([[token]], dtype=torch.long, device=model.device), cache=cache)[0, -1]
        token = int(logits.argmax())
        tokens.append(token)
        all_logits.append(logits)
    vocab = model.config.vocab_size
    stacked = torch.stack(all_logits) if all_logits else torch.empty(0, vocab, dtype=model.dtype, device=model.device)
    return torch.tensor(tokens, dtype=torch.long), stacked.cpu()


def run_colocated(model, request: Request) -> tuple[torch.Tensor, torch.Tensor]:
    """Prefill then decode in one process, the cache handed over in memory. Returns
    ``(tokens, logits)``: the ``max_new_tokens`` greedy tokens (int64) and their logits
    (max_new_tokens, vocab), ``logits[0]`` the prefill's -- what ``generate.generate`` gives for
    the same prompt with greedy sampling."""
    cache, first, first_logits = prefill(model, request)
    tokens, logits = greedy_decode(model, cache, first, request.max_new_tokens)
    return tokens, torch.cat([first_logits[None].cpu(), logits])


# --- the workers --------------------------------------------------------------------------------
@dataclass
class Handoff:
    """The prefill worker's account of one request: ``status`` "handed_off" (``decode_rank``
    acknowledged it) or "failed" (``error`` says why); ``attempts`` the (rank, error or None) of
    every try in order; ``first_token`` and ``first_logits`` (vocab,) from the prefill (None when
    the prefill itself failed)."""

    request_id: int
    status: str = "failed"
    decode_rank: int | None = None
    attempts: list = field(default_factory=list)
    first_token: int | None = None
    first_logits: torch.Tensor | None = None
    error: str | None = None


def _wait(work, timeout: float) -> None:
    if work is not None:
        work.wait(datetime.timedelta(seconds=timeout))


def _send(tensor, dst, group, timeout):
    _wait(dist.isend(tensor, dst=dst, group=group), timeout)


def _recv(tensor, src, group, timeout):
    _wait(dist.irecv(tensor, src=src, group=group), timeout)
    return tensor


def _reply(src, group, timeout, request_id: int, code: int, device) -> None:
    """Wait for a [request_id, code] reply; anything else is an error of the attempt."""
    got = _recv(torch.zeros(2, dtype=torch.int64, device=device), src, group, timeout).tolist()
    if got[0] != request_id:
        raise RuntimeError(f"reply for request id {got[0]}, expected {request_id}")
    if REJECT <= got[1] < REJECT + len(FIELDS) and code == ACCEPT:
        raise ValueError(f"decode rank {src} rejected the header of request {request_id}: its "
                         f"{FIELDS[got[1] - REJECT]} does not match the decode model")
    if got[1] != code:
        raise RuntimeError(f"reply code {got[1]} for request {request_id}, expected {code}")


def send_handoff(header: KVHeader, k: torch.Tensor, v: torch.Tensor, dst: int, group, timeout: float) -> None:
    """One attempt of the protocol's prefill side (module doc, messages 1-4); raises on failure."""
    _send(header.encode().to(k.device), dst, group, timeout)
    _reply(dst, group, timeout, header.request_id, ACCEPT, k.device)
    _send(k, dst, group, timeout)
    _send(v, dst, group, timeout)
    _reply(dst, group, timeout, header.request_id, ACK, k.device)


def _check_worker_args(requests, decode_ranks, timeout):
    if not isinstance(requests, (list, tuple)):
        raise TypeError(f"requests must be a list of Request, got {type(requests).__name__}")
    for r in requests:
        if not _is_request(r):
            raise TypeError(f"requests: every entry must be a Request, got {type(r).__name__}")
    ids = [r.request_id for r in requests]
    if len(set(ids)) != len(ids):
        raise ValueError(f"requests: duplicate request ids {sorted({i for i in ids if ids.count(i) > 1})}")
    if not isinstance(decode_ranks, (list, tuple)) or not decode_ranks:
        raise ValueError(f"decode_ranks must be a non-empty list of ranks, got {decode_ranks!r}")
    ranks = [check_int("decode_ranks", r, minimum=0) for r in decode_ranks]
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"decode_ranks: duplicate ranks in {ranks}")
    if check_real("timeout", timeout) <= 0:
        raise ValueError(f"timeout must be > 0, got {timeout}")
    return ranks


def prefill_worker(model, requests, decode_ranks, *, groups=None, timeout: float = 5.0) -> dict:
    """The prefill side: for each request in order, :func:`prefill` it, then hand its KV to a
    decode worker (module doc: protocol and failure contract); at the end send STOP to every live
    decode rank. Returns ``{request_id: Handoff}`` with one entry per request.

    Args: ``model`` (a reference Transformer); ``requests`` a list of :class:`Request`;
    ``decode_ranks`` the global ranks of the decode workers; ``groups`` ``{rank: process group}``
    the group to use with each decode rank (default None: the default group; a group per pair
    keeps one hung peer's timeout from closing the others' connections under gloo); ``timeout``
    seconds each send/receive may take. Bad input, before anything is sent: ``requests`` not a
    list of Request or with duplicate ids, ``decode_ranks`` empty, with duplicates or the own
    rank, ``timeout`` <= 0: TypeError/ValueError naming the argument."""
    ranks = _check_worker_args(requests, decode_ranks, timeout)
    if dist.get_rank() in ranks:
        raise ValueError(f"decode_ranks {ranks} include this prefill worker's own rank {dist.get_rank()}")
    groups = groups or {}
    live = list(ranks)
    results = {}
    for i, request in enumerate(requests):
        h = results[request.request_id] = Handoff(request.request_id)
        try:
            cache, h.first_token, h.first_logits = prefill(model, request)
        except ValueError as exc:
            h.error = f"prefill: {exc}"
            continue
        k, v = pack_kv(cache)
        c = model.config
        header = KVHeader(request.request_id, k.shape[2], c.n_layers, c.n_kv_heads, c.head_dim,
                          model.dtype, h.first_token, request.max_new_tokens)
        start = ranks[i % len(ranks)]
        order = [r for r in ranks[ranks.index(start):] + ranks[:ranks.index(start)] if r in live]
        for rank in order:
            try:
                send_handoff(header, k, v, rank, groups.get(rank), timeout)
            except ValueError as exc:              # rejected: the request's fault, not the worker's
                h.attempts.append((rank, str(exc)))
                h.error = str(exc)
                break
            except Exception as exc:  # noqa: BLE001 -- a dead or hung peer: gloo raises RuntimeError
                h.attempts.append((rank, f"{type(exc).__name__}: {exc}"))
                live.remove(rank)
                continue
            h.attempts.append((rank, None))
            h.status, h.decode_rank = "handed_off", rank
            break
        else:
            h.error = f"no live decode worker took request {request.request_id}: {h.attempts}"
    for rank in live:
        try:
            _send(STOP.to(model.device), rank, groups.get(rank), timeout)
        except Exception:  # noqa: BLE001 -- a worker that died after its last ack
            pass
    return results


def decode_worker(model, src: int = 0, *, group=None, timeout: float = 30.0) -> dict:
    """The decode side: receive hand-offs from rank ``src`` until STOP; for each, check the header
    against ``model`` (reply REJECT and wait for the next header on a mismatch), receive K and V,
    :func:`unpack_kv` them into a new cache, acknowledge, then :func:`greedy_decode`. Returns
    ``{request_id: (tokens, logits)}`` for every acknowledged request: ``tokens`` all
    ``max_new_tokens`` tokens (the first from the header), ``logits`` (max_new_tokens - 1, vocab)
    those of tokens 1... ``timeout``: seconds to wait for each message (a prefill that sends
    nothing for that long ends the loop with a RuntimeError). ``group``: the process group shared
    with ``src`` (default None: the default group)."""
    check_int("src", src, minimum=0)
    if check_real("timeout", timeout) <= 0:
        raise ValueError(f"timeout must be > 0, got {timeout}")
    done, device = {}, model.device
    while True:
        message = _recv(torch.zeros(HEADER_LEN, dtype=torch.int64, device=device), src, group, timeout)
        if torch.equal(message.cpu(), STOP):
            return done
        header = KVHeader.decode(message)
        try:
            check_header(model, header)
        except ValueError as exc:
            field = next((i for i, name in enumerate(FIELDS) if f"header: {name} " in str(exc)), len(FIELDS) - 1)
            _send(torch.tensor([header.request_id, REJECT + field], device=device), src, group, timeout)
            continue
        _send(torch.tensor([header.request_id, ACCEPT], device=device), src, group, timeout)
        k = _recv(torch.empty(header.shape, dtype=header.dtype, device=device), src, group, timeout)
        v = _recv(torch.empty(header.shape, dtype=header.dtype, device=device), src, group, timeout)
        cache = unpack_kv(model, header, k, v)
        _send(torch.tensor([header.request_id, ACK], device=device), src, group, timeout)
        done[header.request_id] = greedy_decode(model, cache, header.first_token, header.max_new_tokens)

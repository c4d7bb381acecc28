"""Mixture of experts: top-k routing, expert capacity, the load-balance statistic and expert
parallelism (course 06.05, 06.06).

An MoE layer replaces one feed-forward block by ``E`` experts and a router. Each token runs only
``k`` of them, so the FLOPs per token are those of ``k`` experts while all ``E`` must be resident:
the serving bottleneck moves from compute to memory and, across devices, to the all-to-all that
carries tokens to their experts (06.05, 06.06).

**Routing** (:func:`route_topk`). ``router_logits`` (T, E): token t goes to the ``k`` experts of
largest logit, in decreasing order of logit; equal logits (compared as numbers: -0.0 == 0.0) are
ranked by expert index, the LOWER index first (so a tie at the k-th place keeps the lower index).
Gates, in the compute dtype (float64 for float64 logits, else float32):

* ``renormalize=True`` (Mixtral): the softmax of the k selected logits, which is the full softmax
  renormalised over the selected experts, ``p_i / sum_{j selected} p_j``; each row sums to 1;
* ``renormalize=False`` (Switch's top-1): the full softmax's probabilities of the selected experts.

**Capacity** (:func:`expert_capacity`). Each expert accepts at most
``C = ceil(k * T * capacity_factor / E)`` assignments, computed exactly on the float's value
(``fractions.Fraction``: 1.25 * 8 / 4 is 2.5 -> 3); ``capacity_factor=None`` means no limit
(``C = T``: an expert can receive at most one assignment per token, since a token's k experts
are distinct).

**Which assignments are dropped** (:func:`dispatch_positions`): first come, first kept, in
GShard's priority order (GShard, Switch, DeepSpeed's top-2 gating): every token's FIRST choice
comes before any token's second choice, and so on; within one choice rank, tokens in order. The
assignment (t, j) (token t, its j-th choice, expert e) gets ``position`` = the number of
assignments to e earlier in that order; it is kept iff ``position < C``. A dropped assignment
contributes nothing (its gate is NOT given to the token's other experts; a token whose every
assignment is dropped gets output 0, the residual connection around the layer carrying it).

**The expert** e (SwiGLU, Mixtral's): ``expert_e(v) = w_down[e] (silu(w_gate[e] v) * (w_up[e] v))``
with ``w_gate``, ``w_up`` (E, F, d) and ``w_down`` (E, d, F). **The layer** (:func:`moe_forward`)::

    y[t] = sum over kept j of gates[t, j] * expert_{ids[t, j]}(x[t])

Precision (the contract's computation, to which the tolerance rule compares an implementation):
every matmul accumulates in the compute dtype (float32, float64 for float64 x); the hidden
activation ``h = silu(x w_gate^T) * (x w_up^T)`` is computed in the compute dtype and rounded
to x's dtype (as a kernel stores it); ``h w_down^T`` accumulates in the compute dtype, is
multiplied by the gate and summed over the token's kept choices there; y is rounded to x's
dtype once.

**The load-balance statistic** (:func:`load_balance_loss`, Switch Transformer's auxiliary loss):
``E * sum_i f_i * P_i``, where ``f_i`` is the fraction of the T*k routed assignments that chose
expert i (routing before capacity: dropping does not hide the imbalance) and ``P_i`` the mean
over tokens of the full softmax's probability of expert i. Both sum to 1; the statistic is 1 when
either is uniform (f_i = 1/E) and E when every token goes to one expert with probability 1. HF
Mixtral's ``load_balancing_loss_func`` is k times this (its f sums to k).

**Expert parallelism** (:func:`ep_moe_forward`): W ranks of a torch.distributed process group
each hold ``E / W`` experts (rank r the contiguous block ``[r E/W, (r+1) E/W)``) and their own
tokens. The result on every rank is ITS rows of the dense :func:`moe_forward` over the
concatenation of all ranks' tokens in rank order (capacity and drops included: C counts all
``sum_r T_r`` tokens, and the priority order is the dense one over the concatenation). Messages,
in order, all on ``group``:

1. ``all_gather`` of int64 ``[T_r, n_r(0, 0), ..., n_r(k-1, E-1)]``, n_r(j, e) = how many of rank
   r's tokens chose expert e as choice j: every rank computes C and each of its assignments'
   global position without seeing the others' tokens;
2. ``all_to_all_single`` of int64 row counts (how many kept assignments go to each rank);
3. ``all_to_all_single`` of the kept assignments' rows of x (x's dtype), ordered by destination
   rank, then token-major (token, choice); 4. the same for their int64 expert ids (global);
5. each rank runs its experts on the rows it received (each expert's rows in arrival order);
6. ``all_to_all_single`` back of the expert outputs in the compute dtype (rows in the order
   received); 7. each rank multiplies by its gates and sums over choices (the combine).

Every rank must call it with the same ``k``, ``capacity_factor``, ``renormalize``, E/W, d, F and
dtype; ``T_r`` may differ (0 included). Input errors are raised before anything is sent (the
peers of a rank that raised then wait until the group's timeout).

Bad input (every function, before any work): a tensor argument that is not a tensor, or of a
dtype outside float16/bfloat16/float32/float64 (int32/int64 for ``expert_ids``) -> TypeError
naming it; a wrong rank or mismatched sizes -> ValueError naming it; non-finite router logits ->
ValueError naming ``router_logits``; weights of another dtype than x -> TypeError naming them;
tensors on different devices -> ValueError naming the argument; ``k`` not an int (a bool is not
one) -> TypeError, outside [1, E] -> ValueError naming ``k``; ``capacity_factor`` not a real or
None -> TypeError, <= 0 or not finite -> ValueError naming it; ``renormalize`` not a bool ->
TypeError naming it; ``expert_ids`` outside [0, num_experts) -> ValueError naming it. Inputs are
never modified.

Choices the law leaves open (the reference's): ties to the lowest expert index; GShard's
choice-major priority order for capacity; the exact ceil; output 0 for a fully dropped token;
expert e on rank ``e // (E / W)``; the global (not per-rank) capacity of expert parallelism and its
messages above; the expert outputs sent back in the compute dtype.
"""
from __future__ import annotations

from fractions import Fraction

import torch
import torch.distributed as dist
import torch.nn.functional as F

from reference._checks import FLOAT_DTYPES, check_int, check_real, check_tensor, compute_dtype

__all__ = ["route_topk", "expert_capacity", "dispatch_positions", "load_balance_loss", "moe_forward",
           "ep_moe_forward"]  # the contract
__optional__: list[str] = []  # checked when an implementation provides them

ID_DTYPES = (torch.int32, torch.int64)


# --- checks ------------------------------------------------------------------------------------
def _check_logits(router_logits) -> torch.Tensor:
    check_tensor("router_logits", router_logits, ndim=2, dims="tokens, experts", dtypes=FLOAT_DTYPES)
    if router_logits.shape[1] < 1:
        raise ValueError(f"router_logits must have at least one expert column, got shape {tuple(router_logits.shape)}")
    if not bool(torch.isfinite(router_logits).all()):
        raise ValueError("router_logits must be finite (no NaN or inf)")
    return router_logits


def _check_k(k, num_experts: int) -> int:
    k = check_int("k", k, minimum=1)
    if k > num_experts:
        raise ValueError(f"k must be <= the number of experts {num_experts}, got {k}")
    return k


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return value


def _check_layer(x, router_logits, w_gate, w_up, w_down, experts_per_rank: int) -> None:
    """x (T, d); router_logits (T, experts_per_rank * ranks); weights (E_here, F, d), (E_here, d, F)."""
    check_tensor("x", x, ndim=2, dims="tokens, d", dtypes=FLOAT_DTYPES)
    _check_logits(router_logits)
    check_tensor("w_gate", w_gate, ndim=3, dims="experts, F, d")
    check_tensor("w_up", w_up, ndim=3, dims="experts, F, d")
    check_tensor("w_down", w_down, ndim=3, dims="experts, d, F")
    for name, w in (("w_gate", w_gate), ("w_up", w_up), ("w_down", w_down)):
        if w.dtype != x.dtype:
            raise TypeError(f"{name} must have x's dtype {x.dtype}, got {w.dtype}")
    for name, t in (("router_logits", router_logits), ("w_gate", w_gate), ("w_up", w_up), ("w_down", w_down)):
        if t.device != x.device:
            raise ValueError(f"{name} must be on x's device {x.device}, got {t.device}")
    tokens, d = x.shape
    experts, hidden = w_gate.shape[0], w_gate.shape[1]
    if router_logits.shape[0] != tokens:
        raise ValueError(f"router_logits must have one row per token of x ({tokens}), got {router_logits.shape[0]}")
    if experts < 1 or router_logits.shape[1] != experts * experts_per_rank:
        raise ValueError(f"w_gate must hold the experts of router_logits' columns ({router_logits.shape[1]} "
                         f"over {experts_per_rank} rank(s)), got {experts}")
    if w_gate.shape[2] != d:
        raise ValueError(f"w_gate must be (experts, F, d={d}), got {tuple(w_gate.shape)}")
    if tuple(w_up.shape) != tuple(w_gate.shape):
        raise ValueError(f"w_up must have w_gate's shape {tuple(w_gate.shape)}, got {tuple(w_up.shape)}")
    if tuple(w_down.shape) != (experts, d, hidden):
        raise ValueError(f"w_down must be (experts, d, F) = {(experts, d, hidden)}, got {tuple(w_down.shape)}")


# --- routing -----------------------------------------------------------------------------------
def route_topk(router_logits: torch.Tensor, k: int, renormalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` experts of each token and their gates: ``(expert_ids, gates)``, both (T, k);
    ``expert_ids`` int64 in decreasing order of logit, ties to the lower expert index; ``gates`` in
    the compute dtype: the softmax of the selected logits (``renormalize``) or the full softmax's
    probabilities of the selected experts (module doc).

    Bad input: ``router_logits`` not a float tensor of rank 2 with at least one column, or not
    finite -> TypeError/ValueError naming it; ``k`` not an int in [1, E] -> TypeError/ValueError
    naming ``k``; ``renormalize`` not a bool -> TypeError naming it."""
    _check_logits(router_logits)
    k = _check_k(k, router_logits.shape[1])
    _check_bool("renormalize", renormalize)
    return _route(router_logits, k, renormalize)


def _route(router_logits, k: int, renormalize: bool):
    """:func:`route_topk` on checked arguments."""
    logits = router_logits.to(compute_dtype(router_logits.dtype))
    # a stable descending sort keeps equal logits in index order: the lower index first
    ids = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :k]
    if renormalize:
        gates = torch.softmax(logits.gather(1, ids), dim=-1)
    else:
        gates = torch.softmax(logits, dim=-1).gather(1, ids)
    return ids, gates


def expert_capacity(num_tokens: int, num_experts: int, k: int, capacity_factor: float | None) -> int:
    """The most assignments one expert accepts: ``ceil(k * num_tokens * capacity_factor /
    num_experts)`` computed exactly (an int); ``num_tokens`` when ``capacity_factor`` is None.

    Bad input: ``num_tokens`` an int >= 0, ``num_experts`` an int >= 1, ``k`` an int in
    [1, num_experts] (else TypeError/ValueError naming it); ``capacity_factor`` None or a finite
    real > 0 (a bool is not one) -> TypeError/ValueError naming it."""
    num_tokens = check_int("num_tokens", num_tokens, minimum=0)
    num_experts = check_int("num_experts", num_experts, minimum=1)
    k = _check_k(k, num_experts)
    factor = check_real("capacity_factor", capacity_factor, minimum=0.0, allow_none=True)
    if factor is None:
        return num_tokens
    if factor == 0:
        raise ValueError("capacity_factor must be > 0 (or None: no limit), got 0.0")
    exact = Fraction(k * num_tokens) * Fraction(factor) / num_experts
    return -(-exact.numerator // exact.denominator)


def dispatch_positions(expert_ids: torch.Tensor, num_experts: int, capacity: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each assignment's place in its expert's queue and whether it is kept: ``(positions, kept)``,
    int64 and bool, both shaped like ``expert_ids`` (T, k). The queue order is GShard's: choice
    rank first (column 0 of every token before column 1 of any), then token order; ``position``
    counts the earlier assignments to the same expert; ``kept = position < capacity``.

    Bad input: ``expert_ids`` not an int32/int64 tensor of rank 2 with >= 1 column -> TypeError /
    ValueError naming it; a value outside [0, num_experts) -> ValueError naming ``expert_ids``;
    ``num_experts`` an int >= 1, ``capacity`` an int >= 0 (else TypeError/ValueError naming it)."""
    check_tensor("expert_ids", expert_ids, ndim=2, dims="tokens, k", dtypes=ID_DTYPES)
    num_experts = check_int("num_experts", num_experts, minimum=1)
    capacity = check_int("capacity", capacity, minimum=0)
    if expert_ids.shape[1] < 1:
        raise ValueError(f"expert_ids must have at least one column (k >= 1), got shape {tuple(expert_ids.shape)}")
    if expert_ids.numel() and (int(expert_ids.min()) < 0 or int(expert_ids.max()) >= num_experts):
        raise ValueError(f"expert_ids must be in [0, num_experts={num_experts}), got values in "
                         f"[{int(expert_ids.min())}, {int(expert_ids.max())}]")
    positions = _positions(expert_ids, num_experts)
    return positions, positions < capacity


def _positions(expert_ids, num_experts: int) -> torch.Tensor:
    """:func:`dispatch_positions`' positions on checked arguments."""
    order = expert_ids.long().T.reshape(-1)                       # choice-major: (j, t) -> j * T + t
    one_hot = F.one_hot(order, num_experts)                       # (k T, E)
    earlier = torch.cumsum(one_hot, dim=0) - one_hot              # assignments to e before this one
    return earlier.gather(1, order[:, None])[:, 0].reshape(expert_ids.shape[1], -1).T.contiguous()


def load_balance_loss(router_logits: torch.Tensor, k: int = 1) -> torch.Tensor:
    """Switch Transformer's load-balance statistic ``E * sum_i f_i * P_i`` (a 0-d tensor in the
    compute dtype): ``f_i`` the fraction of the T*k top-k assignments (:func:`route_topk`'s, before
    capacity) that chose expert i, ``P_i`` the mean over tokens of softmax(router_logits)_i.

    Bad input: as :func:`route_topk`; no token (T = 0) -> ValueError naming ``router_logits``."""
    _check_logits(router_logits)
    k = _check_k(k, router_logits.shape[1])
    tokens, experts = router_logits.shape
    if tokens == 0:
        raise ValueError("router_logits must hold at least one token: the statistic averages over tokens")
    ids, _ = route_topk(router_logits, k)
    probs = torch.softmax(router_logits.to(compute_dtype(router_logits.dtype)), dim=-1)
    f = torch.zeros(experts, dtype=probs.dtype, device=probs.device).index_add_(
        0, ids.reshape(-1), torch.ones(ids.numel(), dtype=probs.dtype, device=probs.device)) / (tokens * k)
    return experts * torch.sum(f * probs.mean(dim=0))


# --- the layer ----------------------------------------------------------------------------------
def _run_experts(rows: torch.Tensor, expert_of_row: torch.Tensor, w_gate, w_up, w_down) -> torch.Tensor:
    """Expert ``expert_of_row[i]`` (a local index) on ``rows[i]``: (n, d) in the compute dtype."""
    cdt = compute_dtype(rows.dtype)
    out = torch.zeros(rows.shape, dtype=cdt, device=rows.device)
    for e in range(w_gate.shape[0]):
        sel = (expert_of_row == e).nonzero()[:, 0]
        if sel.numel() == 0:
            continue
        v = rows[sel].to(cdt)
        h = (F.silu(v @ w_gate[e].to(cdt).T) * (v @ w_up[e].to(cdt).T)).to(rows.dtype)
        out[sel] = h.to(cdt) @ w_down[e].to(cdt).T
    return out


def moe_forward(x: torch.Tensor, router_logits: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
                w_down: torch.Tensor, k: int, capacity_factor: float | None = None,
                renormalize: bool = True) -> torch.Tensor:
    """The MoE layer on x (T, d): route (:func:`route_topk`), drop past capacity
    (:func:`expert_capacity`, :func:`dispatch_positions`), run each kept assignment's expert and
    sum them weighted by their gates (module doc); (T, d) in x's dtype.

    Bad input: x not a float tensor (T, d); ``router_logits`` not (T, E) finite floats; ``w_gate``,
    ``w_up`` not (E, F, d), ``w_down`` not (E, d, F), of x's dtype and device -> TypeError /
    ValueError naming the argument; ``k``, ``capacity_factor``, ``renormalize`` as in
    :func:`route_topk` and :func:`expert_capacity`."""
    _check_layer(x, router_logits, w_gate, w_up, w_down, 1)
    experts = w_gate.shape[0]
    k = _check_k(k, experts)
    capacity = expert_capacity(x.shape[0], experts, k, capacity_factor)
    ids, gates = route_topk(router_logits, k, renormalize)
    _, kept = dispatch_positions(ids, experts, capacity)
    slot = kept.reshape(-1).nonzero()[:, 0]                       # kept (t, j), token-major
    out = _run_experts(x[slot // k], ids.reshape(-1)[slot], w_gate, w_up, w_down)
    y = torch.zeros(x.shape, dtype=out.dtype, device=x.device)
    y.index_add_(0, slot // k, out * gates.reshape(-1)[slot, None].to(out.dtype))
    return y.to(x.dtype)


# --- expert parallelism ---------------------------------------------------------------------------
def _ep_forward(x, router_logits, w_gate, w_up, w_down, k, capacity_factor, renormalize, group, run_experts):
    """:func:`ep_moe_forward` with the local experts computed by ``run_experts(rows, local expert of
    each row, w_gate, w_up, w_down)`` -> (rows, d) in the compute dtype (the optimized module
    passes its kernels)."""
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("group: torch.distributed is not initialized (init_process_group first)")
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    _check_layer(x, router_logits, w_gate, w_up, w_down, world)
    local, experts = w_gate.shape[0], router_logits.shape[1]
    k = _check_k(k, experts)
    expert_capacity(x.shape[0], experts, k, capacity_factor)     # its errors before anything is sent
    ids, gates = route_topk(router_logits, k, renormalize)
    tokens, device = x.shape[0], x.device

    # 1. token and (choice, expert) counts of every rank
    counts = F.one_hot(ids.T, experts).sum(dim=1)                 # (k, E): this rank's n(j, e)
    mine = torch.cat([torch.tensor([tokens], device=device), counts.reshape(-1)])
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine, group=group)
    table = torch.stack(gathered)                                 # (W, 1 + k E)
    capacity = expert_capacity(int(table[:, 0].sum()), experts, k, capacity_factor)
    per_rank = table[:, 1:].reshape(world, k, experts)
    # the global queue: choice j of every rank's tokens (rank order) after all choices < j
    before = per_rank.sum(dim=0).cumsum(dim=0) - per_rank.sum(dim=0) + per_rank[:rank].sum(dim=0)
    local_pos = _positions(ids, experts)                          # position among this rank's own
    local_pos = local_pos - torch.cat([torch.zeros_like(counts[:1]), counts.cumsum(dim=0)[:-1]]).gather(1, ids.T).T
    positions = local_pos + before.gather(1, ids.T).T
    kept = positions < capacity

    # 2-4. dispatch: the kept assignments by destination rank, then token-major
    slot = kept.reshape(-1).nonzero()[:, 0]
    slot = slot[torch.argsort(ids.reshape(-1)[slot] // local, stable=True)]
    dest = ids.reshape(-1)[slot] // local
    send_counts = torch.bincount(dest, minlength=world)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=group)
    send_split, recv_split = send_counts.tolist(), recv_counts.tolist()
    rows = torch.empty((sum(recv_split), x.shape[1]), dtype=x.dtype, device=device)
    dist.all_to_all_single(rows, x[slot // k].contiguous(), recv_split, send_split, group=group)
    row_ids = torch.empty(sum(recv_split), dtype=torch.int64, device=device)
    dist.all_to_all_single(row_ids, ids.reshape(-1)[slot].contiguous(), recv_split, send_split, group=group)

    # 5-6. the local experts, and the outputs back where they came from
    out = run_experts(rows, row_ids - rank * local, w_gate, w_up, w_down)
    back = torch.empty((slot.numel(), x.shape[1]), dtype=out.dtype, device=device)
    dist.all_to_all_single(back, out.contiguous(), send_split, recv_split, group=group)

    # 7. combine
    y = torch.zeros(x.shape, dtype=out.dtype, device=device)
    y.index_add_(0, slot // k, back * gates.reshape(-1)[slot, None].to(out.dtype))
    return y.to(x.dtype)


def ep_moe_forward(x: torch.Tensor, router_logits: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
                   w_down: torch.Tensor, k: int, capacity_factor: float | None = None, renormalize: bool = True,
                   *, group=None) -> torch.Tensor:
    """One rank's part of the expert-parallel MoE layer (a collective: every rank of ``group``
    calls it, module doc): x (T_r, d) and ``router_logits`` (T_r, E) are this rank's tokens,
    ``w_gate``, ``w_up`` (E/W, F, d) and ``w_down`` (E/W, d, F) its experts, rank r holding
    experts [r E/W, (r+1) E/W). Returns this rank's rows of :func:`moe_forward` over all ranks'
    tokens concatenated in rank order (T_r, d), in x's dtype. ``group``: the process group
    (None: the default group).

    Bad input: as :func:`moe_forward`, the experts of ``w_gate`` times the group's size having to
    be router_logits' columns; torch.distributed not initialized -> RuntimeError."""
    return _ep_forward(x, router_logits, w_gate, w_up, w_down, k, capacity_factor, renormalize, group,
                       _run_experts)

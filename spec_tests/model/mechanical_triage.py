"""Surviving mechanical variants of reference/model.py that are not gaps of the spec (read by
``conformance.mechanical.triage`` as data). Key: (module, the source line, the change).

Gaps closed since (no entry here): a ``dim`` not a multiple of ``n_heads`` whose quotient is even
(the only row had an odd quotient, rejected as an odd head_dim anyway: the CONFIG_BAD row "dim not
a multiple of n_heads, even quotient"); rope_theta in (1, 2] rejected
(test_config_accepts_the_edges_of_its_legal_ranges); a cache whose last layer is fuller than layer
0 (test_rejects_a_cache_too_full_in_any_layer)."""

TRIAGE = {
    ("reference", 'check_int("head_dim", self.head_dim, minimum=1)', "1 -> 2"): (
        "equivalent", "head_dim 1 is odd, so the next line rejects it with a ValueError naming head_dim "
                      "anyway; every other int is treated alike"),
    ("reference", 'check_int("batch", batch, minimum=1)', "1 -> 0"): (
        "equivalent", "batch 0 then reaches KVCache(batch=0), which raises the same ValueError naming batch"),
    ("reference", 'max_seq_len = c.max_seq_len if max_seq_len is None else check_int("max_seq_len", max_seq_len, '
                  'minimum=1)', "1 -> 0"): (
        "equivalent", "max_seq_len 0 then reaches KVCache(max_seq_len=0), which raises the same ValueError "
                      "naming max_seq_len"),
    ("reference", "return self.o_proj(out.transpose(1, 2).reshape(batch, seq, self.n_heads * self.head_dim))",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(2, 1) is transpose(1, 2): a swap of two dimensions is symmetric"),
    ("reference", 'check_int("batch", batch, minimum=1)', 'drop `check_int("batch", batch, minimum=1)`'): (
        "equivalent", "KVCache(batch=batch) runs the same check_int('batch', batch, minimum=1) before allocating "
                      "anything; only which error comes first when max_seq_len is bad too changes, which the "
                      "contract does not fix"),
    ("reference", "q = self.q_proj(x).view(batch, seq, self.n_heads, self.head_dim).transpose(1, 2)",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(2, 1) is transpose(1, 2): a swap of two dimensions is symmetric"),
    ("reference", "k = self.k_proj(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(2, 1) is transpose(1, 2): a swap of two dimensions is symmetric"),
    ("reference", "v = self.v_proj(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)",
     "transpose(a, b, ...) -> transpose(b, a, ...)"): (
        "equivalent", "transpose(2, 1) is transpose(1, 2): a swap of two dimensions is symmetric"),
}

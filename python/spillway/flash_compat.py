"""FlashAttention-compatible entry: flash_attn_varlen_func with the exact
signature and positional order of flash_attn.flash_attn_varlen_func
(flash-attn 2.x), so code written for FlashAttention's varlen op runs on
Spillway by changing the import.

flash_attn_with_kvcache takes FlashAttention's KV-cache entry the same way:
a contiguous or paged (block_table) cache, new k/v appended in place at
cache_seqlens, causal bottom-right.

Spillway computes the forward pass only, without dropout, sliding window,
soft-capping, ALiBi, rotary embedding or attention probabilities: each of
those options, given a value other than its default, raises SpillwayError
(SW_STATUS_UNSUPPORTED) naming the option, instead of being ignored. Paged
K/V (block_table) runs where the tensors are, like spillway.paged_attention.
"""

import math

from . import _lib
import numpy as np

from .attention import (_PagedRun, _check_max_lens, _host_indptr, _is_torch, _refuse_capture,
                        _torch_mod, paged_attention, varlen_attention)


def _as_float(x):
    """float(x), or NaN (which is never 0.0) for what is not a number."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _unsupported(detail):
    _lib.fail(_lib.SW_STATUS_UNSUPPORTED, detail)


def _check_options(q, k, v, dropout_p, softcap, alibi_slopes, *more):
    if _as_float(dropout_p) != 0.0:
        _unsupported(f"dropout_p={dropout_p!r}: Spillway has no dropout (inference only); "
                     "pass dropout_p=0.0")
    if _as_float(softcap) != 0.0:
        _unsupported(f"softcap={softcap!r}: soft-capping is not supported; pass softcap=0.0")
    if alibi_slopes is not None:
        _unsupported("alibi_slopes: ALiBi biases are not supported; pass None")
    torch = _torch_mod()
    if torch is not None and torch.is_grad_enabled() and any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in (q, k, v) + more):
        _unsupported("an input requires grad: Spillway computes the forward pass only "
                     "(no backward); call it under torch.no_grad() or torch.inference_mode()")


def _causal_of(window_size, causal, max_k):
    """The causal flag a window_size means, as FlashAttention reads it:
    causal sets the right side to 0; a side of at least max_k keys (the
    longest key length) is no limit; then (-1, -1) is full attention and
    (-1, 0) causal (bottom-right). Any other window is refused."""
    try:
        left, right = (int(w) for w in window_size)
    except (TypeError, ValueError):
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"window_size={window_size!r} must be a pair (left, right)")
    if causal:
        right = 0
    left = -1 if left < 0 or left >= max_k else left
    right = -1 if right < 0 or right >= max_k else right
    if left != -1 or right not in (-1, 0):
        _unsupported(f"window_size={tuple(window_size)!r}: sliding-window attention is not "
                     f"supported (only windows of at least the longest key length, "
                     f"{max_k}, or (-1, 0) for causal); pass (-1, -1)")
    return right == 0


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash_attn.flash_attn_varlen_func, computed by Spillway.

    Args (FlashAttention's, in its order):
        q: [total_q, Hq, d]; k, v: [total_k, Hkv, d], Hkv dividing Hq (GQA).
            torch CUDA tensors (bf16/fp16) run on the current stream; torch CPU
            tensors and numpy arrays run on the CPU (spillway.varlen_attention
            lists the dtypes and layouts).
        cu_seqlens_q, cu_seqlens_k: int prefix sums [batch+1]. Host copies
            keep a CUDA call asynchronous (CUDA tensors are copied to the host
            for planning, which synchronises).
        max_seqlen_q, max_seqlen_k: checked to be at least the real maxima.
        dropout_p: must be 0.0.
        softmax_scale: default 1/sqrt(d).
        causal: bottom-right aligned, as FlashAttention's: query i of a
            request sees keys j <= i + (k_len - q_len); a row that sees no
            key is zero.
        window_size: (-1, -1), or as FlashAttention reads it: a side of at
            least max_seqlen_k keys is no limit, and (-1, 0) is causal;
            other sliding windows are refused.
        softcap: must be 0.0.
        alibi_slopes: must be None.
        deterministic: accepted; it selects FlashAttention's backward pass,
            and Spillway's forward pass gives the same result on every run.
        return_attn_probs: True returns (out, softmax_lse, None):
            softmax_lse float32 [Hq, total_q] (natural log), as
            FlashAttention's; no attention probabilities (its third output
            is a dropout mask, and there is no dropout here).
        block_table: None, or int32 [batch, max_pages]: then k, v are page
            pools [num_pages, page_size, Hkv, d] (page_size <= 256) and
            cu_seqlens_k gives each request's key count
            (spillway.paged_attention).

    Returns:
        out: [total_q, Hq, d], q's dtype and device; with return_attn_probs
        (out, softmax_lse, None).

    Raises:
        SpillwayError: SW_STATUS_UNSUPPORTED for an option above that is not
        at its default, or for inputs that require grad while autograd is
        on (forward only); otherwise as spillway.varlen_attention.
    """
    _check_options(q, k, v, dropout_p, softcap, alibi_slopes)
    max_k = max_seqlen_k
    if max_k is None:  # (accepted, as varlen_attention does: the offsets give it)
        ck = _host_indptr(cu_seqlens_k, "cu_seqlens_k").astype(np.int64)
        max_k = int(np.diff(ck).max()) if ck.size > 1 else 0
    causal = _causal_of(window_size, causal, int(max_k))
    lse = bool(return_attn_probs)
    if block_table is not None:
        # the checks varlen_attention makes of the offsets, before the pages
        cq = _host_indptr(cu_seqlens_q, "cu_seqlens_q").astype(np.int64)
        cu = _host_indptr(cu_seqlens_k, "cu_seqlens_k").astype(np.int64)
        if cq.shape != cu.shape:
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"cu_seqlens_q has {cq.shape[0]} entries and cu_seqlens_k {cu.shape[0]} "
                      "(both must be batch+1)")
        for name, c in (("cu_seqlens_q", cq), ("cu_seqlens_k", cu)):
            if c[0] != 0 or (c.size > 1 and int(np.diff(c).min()) < 0):
                _lib.fail(_lib.SW_STATUS_INVALID,
                          f"{name} must start at 0 and never decrease; got {c.tolist()[:8]}")
        _check_max_lens(max_seqlen_q, max_seqlen_k,
                        int(np.diff(cq).max()) if cq.size > 1 else 0,
                        int(np.diff(cu).max()) if cu.size > 1 else 0)
        res = paged_attention(q, k, v, cu_seqlens_q, np.diff(cu), block_table,
                              causal=causal, softmax_scale=softmax_scale, return_lse=lse)
    else:
        res = varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               causal=causal, softmax_scale=softmax_scale, return_lse=lse)
    if not lse:
        return res
    out, l = res  # l [total_q, Hq]: FlashAttention's is [Hq, total_q]
    return out, (l.t().contiguous() if _is_torch(l) else np.ascontiguousarray(l.T)), None


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None,
                            block_table=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), softcap=0.0, rotary_interleaved=True,
                            alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    """flash_attn.flash_attn_with_kvcache, computed by Spillway (torch CUDA
    tensors on the current stream, CPU tensors or numpy arrays; the paths
    of spillway.paged_attention).

    Args (FlashAttention's, in its order):
        q: [batch, seqlen_q, Hq, d].
        k_cache, v_cache: [batch_cache, seqlen_cache, Hkv, d], or with
            block_table the page pools [num_pages, page_size, Hkv, d]
            (page_size <= 256).
        k, v: None, or [batch, seqlen_new, Hkv, d]: written into the cache
            in place at positions cache_seqlens .. cache_seqlens + seqlen_new
            (through block_table when paged) before attention.
        rotary_cos, rotary_sin: must be None.
        cache_seqlens: int or int [batch]: tokens in the cache before k, v
            (default: the whole cache, seqlen_cache; required when paged or
            when k, v are given).
        cache_batch_idx: None, or int [batch]: the cache row of each request
            (contiguous cache only).
        cache_leftpad: must be None.
        block_table: None, or int32 [batch, max_pages].
        softmax_scale: default 1/sqrt(d).
        causal: bottom-right aligned: query i sees keys j <= i + (kv_len -
            seqlen_q), kv_len = cache_seqlens + seqlen_new.
        window_size: (-1, -1), or as FlashAttention reads it: a side of at
            least the cache's positions is no limit, and (-1, 0) is causal;
            other sliding windows are refused.
        softcap, alibi_slopes: must be their defaults.
        rotary_interleaved, num_splits: accepted (no rotary; the library
            chooses its own split).
        return_softmax_lse: also return the LSE, [batch, Hq, seqlen_q] float32
            (natural log; -inf for a row that sees no key, where
            FlashAttention's kernels give +inf; that row's output is 0 in
            both).

    Returns:
        out [batch, seqlen_q, Hq, d] (q's dtype), and the LSE when asked.

    Raises:
        SpillwayError: SW_STATUS_UNSUPPORTED for an option not at its default;
        SW_STATUS_INVALID for inconsistent shapes, a
        kv_len past the cache (a block_table row too short), or k, v that
        would be written over a token another request holds (a page shared
        by a common prefix: copy it first; a cache row listed twice in
        cache_batch_idx); the library's page-table checks name the bad
        entry. A refused call leaves the caches as they were.
    """
    # (the new k, v too: written into the caches by an autograd-tracked
    # assignment, they would put the caches on the graph and every later
    # call on them would be refused)
    _check_options(q, k_cache, v_cache, 0.0, softcap, alibi_slopes, k, v)
    if rotary_cos is not None or rotary_sin is not None:
        _unsupported("rotary_cos / rotary_sin: rotary embedding is not applied here; apply it "
                     "to q and k first and pass None")
    if cache_leftpad is not None:
        _unsupported("cache_leftpad: left-padded caches are not supported; pass None")
    torch = _torch_mod() if _is_torch(q) else None
    _refuse_capture(torch)  # (before any tensor is read to the host)
    if torch is None:
        q, k_cache, v_cache = np.asarray(q), np.asarray(k_cache), np.asarray(v_cache)
        k = None if k is None else np.asarray(k)
        v = None if v is None else np.asarray(v)
    if len(q.shape) != 4 or len(k_cache.shape) != 4 or tuple(k_cache.shape) != tuple(v_cache.shape):
        _lib.fail(_lib.SW_STATUS_INVALID,
                  f"q must be [batch, seqlen_q, Hq, d] and k_cache, v_cache one 4-D shape; got "
                  f"{tuple(q.shape)}, {tuple(k_cache.shape)}, {tuple(v_cache.shape)}")
    if (k is None) != (v is None):
        _lib.fail(_lib.SW_STATUS_INVALID, "k and v must be given together")
    batch, sq, hq, d = (int(x) for x in q.shape)
    paged = block_table is not None
    hkv = int(k_cache.shape[2])
    new = 0
    if k is not None:
        if tuple(k.shape) != tuple(v.shape) or len(k.shape) != 4 or int(k.shape[0]) != batch \
                or int(k.shape[2]) != hkv or int(k.shape[3]) != d:
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"k, v must be [batch={batch}, seqlen_new, Hkv={hkv}, d={d}]; got "
                      f"{tuple(k.shape)}, {tuple(v.shape)}")
        new = int(k.shape[1])
        # checked before anything is written: FlashAttention's own refusals
        # (one dtype, one device), and a cache that can take the write
        if torch is not None and not (_is_torch(k) and _is_torch(v)):
            _lib.fail(_lib.SW_STATUS_INVALID, "k and v must be torch tensors, as q is")
        if k.dtype != k_cache.dtype or v.dtype != v_cache.dtype or q.dtype != k_cache.dtype:
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"q, k, v and the caches must share one dtype; got q {q.dtype}, k "
                      f"{k.dtype}, v {v.dtype}, caches {k_cache.dtype} / {v_cache.dtype}")
        if torch is not None and (k.device != k_cache.device or v.device != v_cache.device):
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"k and v must be on the caches' device {k_cache.device}; got "
                      f"{k.device}, {v.device}")
        if torch is None and not (k_cache.flags.writeable and v_cache.flags.writeable):
            _lib.fail(_lib.SW_STATUS_INVALID, "k_cache and v_cache must be writable to "
                      "append k, v")
    if cache_seqlens is None:
        if paged:
            _lib.fail(_lib.SW_STATUS_INVALID, "cache_seqlens is required with block_table")
        if k is not None:
            # (FlashAttention refuses it too: where the new tokens go would be a guess)
            _lib.fail(_lib.SW_STATUS_INVALID, "cache_seqlens is required when k, v are given")
        base = np.full(batch, int(k_cache.shape[1]) - new, dtype=np.int64)
    elif isinstance(cache_seqlens, (int, np.integer)):
        base = np.full(batch, int(cache_seqlens), dtype=np.int64)
    else:
        base = (cache_seqlens.detach().to("cpu").numpy() if _is_torch(cache_seqlens)
                else np.asarray(cache_seqlens))
        if base.dtype.kind not in "iu":
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"cache_seqlens must hold integers; got {base.dtype}")
        base = base.astype(np.int64).reshape(-1)
        if base.shape[0] != batch:
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"cache_seqlens has {base.shape[0]} entries for batch {batch}")
    if base.size and int(base.min()) < 0:
        _lib.fail(_lib.SW_STATUS_INVALID, "cache_seqlens must be >= 0")
    seq_lens = base + new

    if paged:
        if cache_batch_idx is not None:
            _unsupported("cache_batch_idx with block_table: the table already maps requests "
                         "to pages; pass None")
        table = block_table.detach().to("cpu").numpy() if _is_torch(block_table) \
            else np.asarray(block_table)
        if table.ndim != 2 or table.shape[0] != batch:
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"block_table must be [batch={batch}, max_pages]; got {tuple(table.shape)}")
        if table.dtype.kind not in "iu":
            _lib.fail(_lib.SW_STATUS_INVALID, "block_table must hold integer page indices")
        table = table.astype(np.int64)  # range-checked against int32 by the plan below
        page = int(k_cache.shape[1])
        k_pool, v_pool = k_cache, v_cache
    else:
        # a contiguous cache as pages: row r's tokens [i*P, (i+1)*P) are page
        # r*(S/P) + i, P the largest divisor of S up to 256
        S = int(k_cache.shape[1])
        page = max(p for p in range(1, min(S, 256) + 1) if S % p == 0) if S else 1
        rows = np.arange(batch, dtype=np.int64) if cache_batch_idx is None else (
            cache_batch_idx.detach().to("cpu").numpy() if _is_torch(cache_batch_idx)
            else np.asarray(cache_batch_idx))
        if rows.dtype.kind not in "iu":
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"cache_batch_idx must hold integers; got {rows.dtype}")
        rows = rows.astype(np.int64).reshape(-1)
        if rows.shape[0] != batch or (rows.size and (int(rows.min()) < 0
                                                     or int(rows.max()) >= k_cache.shape[0])):
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"cache_batch_idx must give {batch} rows of the cache's "
                      f"{int(k_cache.shape[0])}")
        if seq_lens.size and int(seq_lens.max()) > S:
            b = int(np.argmax(seq_lens))
            _lib.fail(_lib.SW_STATUS_INVALID,
                      f"request {b}: cache_seqlens {int(base[b])} + {new} new tokens > the "
                      f"cache's {S} positions")
        npp = S // page if S else 0
        table = rows[:, None] * npp + np.arange(npp, dtype=np.int64)[None, :]
        shape = (int(k_cache.shape[0]) * npp, page, hkv, d)
        k_pool = k_cache.reshape(shape)  # a view when the rows are contiguous
        v_pool = v_cache.reshape(shape)

    # FlashAttention's reading of the window: over the cache's positions
    causal = _causal_of(window_size, causal,
                        int(table.shape[1]) * page if paged else int(k_cache.shape[1]))

    # Everything is checked (shapes, dtypes, heads, the table over every
    # position the call will hold) and planned before a byte of the cache
    # is written: a refused call leaves the cache as it was.
    cu_q = np.arange(batch + 1, dtype=np.int32) * sq
    plan = _PagedRun(q.reshape(batch * sq, hq, d), k_pool, v_pool, cu_q, seq_lens, table,
                     bool(causal), softmax_scale, "NHD", None, 0)
    saved = None  # the appended positions' old contents, until the run succeeds
    rows = None

    def write_back():
        # where reshape had to copy a cache, the pool's writes go back to it
        if not paged:
            if not _shares(k_pool, k_cache):
                k_cache[...] = k_pool.reshape(k_cache.shape)
            if not _shares(v_pool, v_cache):
                v_cache[...] = v_pool.reshape(v_cache.shape)

    try:
        if k is not None and new:
            # the new tokens into their pages, in place
            pos = base[:, None] + np.arange(new, dtype=np.int64)[None, :]  # [batch, new]
            pages = np.take_along_axis(table, pos // page, axis=1).reshape(-1)
            offs = (pos % page).reshape(-1)
            if batch > 1:
                _append_conflicts(table, seq_lens, pages, offs, new, page, paged,
                                  int(k_pool.shape[0]))
            rows = _token_rows(k_pool, v_pool, torch)
            if rows is not None:
                # pools whose (page, token) dims flatten to rows: one index
                # select and one index copy each (the tuple indexing below
                # took ~95 us of a 250 us CPU decode call)
                at = torch.from_numpy(pages * page + offs)
                if k_pool.device.type != "cpu":
                    at = at.to(k_pool.device)
                saved = (rows[0].index_select(0, at), rows[1].index_select(0, at))
                rows[0].index_copy_(0, at, k.reshape(-1, hkv, d))
                rows[1].index_copy_(0, at, v.reshape(-1, hkv, d))
            elif torch is not None:
                at = (torch.from_numpy(pages).to(k_pool.device),
                      torch.from_numpy(offs).to(k_pool.device))
                saved = (k_pool[at].clone(), v_pool[at].clone())
                k_pool[at] = k.reshape(-1, hkv, d)
                v_pool[at] = v.reshape(-1, hkv, d)
            else:
                at = (pages, offs)
                saved = (k_pool[at].copy(), v_pool[at].copy())
                k_pool[at] = k.reshape(-1, hkv, d)
                v_pool[at] = v.reshape(-1, hkv, d)
            write_back()
        res = plan.run(return_softmax_lse)
    except BaseException:
        # a refused run (an alignment, a stride, no workspace) leaves the
        # cache as it was
        if saved is not None:
            if rows is not None:
                rows[0].index_copy_(0, at, saved[0])
                rows[1].index_copy_(0, at, saved[1])
            else:
                k_pool[at] = saved[0]
                v_pool[at] = saved[1]
            write_back()
        raise
    finally:
        plan.close()
    if not return_softmax_lse:
        return res.reshape(batch, sq, hq, d)
    out, lse = res
    lse = lse.reshape(batch, sq, hq)
    lse = lse.permute(0, 2, 1).contiguous() if torch is not None \
        else np.ascontiguousarray(lse.transpose(0, 2, 1))
    return out.reshape(batch, sq, hq, d), lse


def _append_conflicts(table, seq_lens, pages, offs, new, page, paged, num_pages):
    """Refuses an append that writes a token another request's table holds
    (a page shared by a common prefix takes no append at or below the
    other's tokens; two requests never write one token), as the library's
    sw_paged_kv_append_host does: O(table) in numpy (a mark per pool page
    in front of the written pages, sorted), before any write. The table's
    entries a request reads are in range (the plan checked them)."""
    batch = table.shape[0]
    writer = np.repeat(np.arange(batch), new)
    read = np.arange(table.shape[1])[None, :] < ((seq_lens + page - 1) // page)[:, None]
    mark = np.zeros(num_pages, dtype=bool)
    mark[pages] = True
    cc, ccol = np.nonzero(mark[np.where(read, table, pages[0])] & read)
    if cc.size == 0:
        return
    cp = table[cc, ccol]
    ch = np.minimum(seq_lens[cc] - ccol * page, page)  # tokens the entry's request holds
    order = np.argsort(pages, kind="stable")
    lo = np.searchsorted(pages[order], cp, "left")
    cnt = np.searchsorted(pages[order], cp, "right") - lo
    rep = np.repeat(np.arange(cc.size), cnt)
    w = order[np.repeat(lo, cnt) + np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)]
    bad = np.nonzero((writer[w] != cc[rep]) & (offs[w] < ch[rep]))[0]
    if bad.size:
        i = int(bad[0])
        b, c = int(writer[w[i]]), int(cc[rep[i]])
        if paged:
            where = (f"page {int(pages[w[i]])} at token {int(offs[w[i]])}, which request {c} "
                     f"holds (block_table[{c}][{int(ccol[rep[i]])}]): a shared page takes no "
                     f"append (copy it first)")
        else:
            where = (f"cache position {int(ccol[rep[i]]) * page + int(offs[w[i]])} of a cache "
                     f"row request {c} uses too (cache_batch_idx)")
        _lib.fail(_lib.SW_STATUS_INVALID, f"request {b} appends to {where}; nothing written")


def _token_rows(k_pool, v_pool, torch):
    """Torch pools [pages, page, Hkv, d] seen as [pages * page, Hkv, d]
    views (token rows), or None where a view cannot be had (numpy pools,
    strides that do not flatten)."""
    if torch is None:
        return None
    try:
        return (k_pool.view(-1, k_pool.shape[2], k_pool.shape[3]),
                v_pool.view(-1, v_pool.shape[2], v_pool.shape[3]))
    except RuntimeError:
        return None


def _shares(a, b):
    """Whether a (a reshape of b) is a view of b's memory."""
    if _is_torch(a):
        return a.data_ptr() == b.data_ptr()
    return np.shares_memory(a, b)

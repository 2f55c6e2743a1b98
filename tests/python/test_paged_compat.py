"""Paged K/V from Python: spillway.paged_attention, FlashAttention's
flash_attn_with_kvcache (contiguous and paged caches, new k/v appended in
place) and flash_attn_varlen_func(..., block_table=...), against the
float64 reference over the same keys packed densely; bad tables and
unsupported options refused without touching the cache."""

import inspect

import numpy as np
import pytest

import spillway
from spillway import SpillwayError
from sw_ref import expect_error, ref_attention, rel_l2

# flash_attn.flash_attn_with_kvcache (flash-attn 2.x): names, order, defaults.
FA_KVCACHE_SIGNATURE = [
    ("q", inspect.Parameter.empty), ("k_cache", inspect.Parameter.empty),
    ("v_cache", inspect.Parameter.empty), ("k", None), ("v", None), ("rotary_cos", None),
    ("rotary_sin", None), ("cache_seqlens", None), ("cache_batch_idx", None),
    ("cache_leftpad", None), ("block_table", None), ("softmax_scale", None), ("causal", False),
    ("window_size", (-1, -1)), ("softcap", 0.0), ("rotary_interleaved", True),
    ("alibi_slopes", None), ("num_splits", 0), ("return_softmax_lse", False),
]


def test_signature_is_flash_attentions():
    sig = inspect.signature(spillway.flash_attn_with_kvcache)
    assert [(p.name, p.default) for p in sig.parameters.values()] == FA_KVCACHE_SIGNATURE


def _pool(rng, lens, page, hkv, d, layout="NHD", spare=3):
    """A shuffled page pool holding each request's keys; returns the pools,
    the block table and the dense (packed) K/V."""
    need = [(n + page - 1) // page for n in lens]
    npages = sum(need) + spare
    perm = rng.permutation(npages)
    width = max(need + [1])
    table = np.full((len(lens), width + 1), -7, dtype=np.int32)  # junk past the need
    shape = (npages, page, hkv, d) if layout == "NHD" else (npages, hkv, page, d)
    kp = rng.standard_normal(shape).astype(np.float32)
    vp = rng.standard_normal(shape).astype(np.float32)
    dk, dv, at = [], [], 0
    for b, n in enumerate(lens):
        pages = perm[at:at + need[b]]
        at += need[b]
        table[b, :need[b]] = pages
        for j in range(n):
            p, o = pages[j // page], j % page
            if layout == "NHD":
                dk.append(kp[p, o])
                dv.append(vp[p, o])
            else:
                dk.append(kp[p, :, o])
                dv.append(vp[p, :, o])
    e = np.zeros((0, hkv, d), np.float32)
    return kp, vp, table, (np.stack(dk) if dk else e), (np.stack(dv) if dv else e)


@pytest.mark.parametrize("page", [1, 16, 64, 256])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_paged_attention_matches_reference(page, layout):
    rng = np.random.default_rng(page * 7 + (layout == "HND"))
    kv_lens = [300, 0, 1, 17, 129]
    q_lens = [5, 0, 1, 17, 3]  # chunks continuing a cached prefix, empty, one token
    hq, hkv, d = 8, 2, 64
    kp, vp, table, dk, dv = _pool(rng, kv_lens, page, hkv, d, layout)
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(kv_lens)]).astype(np.int32)
    q = rng.standard_normal((int(cu_q[-1]), hq, d)).astype(np.float32)
    for causal in (False, True):
        out, lse = spillway.paged_attention(q, kp, vp, cu_q, kv_lens, table, causal=causal,
                                            return_lse=True, layout=layout)
        ref, rlse = ref_attention(q, dk, dv, cu_q, cu_k, causal)
        assert rel_l2(out, ref) <= 1e-5
        fin = np.isfinite(rlse)
        assert np.allclose(lse[fin], rlse[fin], atol=1e-4)
        assert np.all(np.isneginf(lse[~fin]))


def test_paged_attention_torch_bf16():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    kv_lens, q_lens = [40, 77], [1, 4]
    kp, vp, table, dk, dv = _pool(rng, kv_lens, 16, 2, 128)
    cu_q = np.array([0, 1, 5], np.int32)
    cu_k = np.array([0, 40, 117], np.int32)
    q = rng.standard_normal((5, 8, 128)).astype(np.float32)
    tb = lambda a: torch.from_numpy(a).to(torch.bfloat16)
    out = spillway.paged_attention(tb(q), tb(kp), tb(vp), cu_q, torch.tensor(kv_lens),
                                   torch.from_numpy(table), causal=True)
    assert out.dtype == torch.bfloat16 and tuple(out.shape) == (5, 8, 128)
    rq, rk, rv = (tb(a).float().numpy() for a in (q, dk, dv))
    ref, _ = ref_attention(rq, rk, rv, cu_q, cu_k, True)
    assert rel_l2(out.float().numpy(), ref) <= 1e-2


def test_varlen_func_with_block_table():
    rng = np.random.default_rng(9)
    kv_lens, q_lens = [256, 100, 3], [2, 100, 1]
    kp, vp, table, dk, dv = _pool(rng, kv_lens, 256, 4, 64)
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(kv_lens)]).astype(np.int32)
    q = rng.standard_normal((int(cu_q[-1]), 8, 64)).astype(np.float32)
    out = spillway.flash_attn_varlen_func(q, kp, vp, cu_q, cu_k, 100, 256, 0.0, None, True,
                                          block_table=table)
    ref, _ = ref_attention(q, dk, dv, cu_q, cu_k, True)
    assert rel_l2(out, ref) <= 1e-5
    # its offsets and maxima checked as without pages
    for cq, ck, mq, mk, what in ((cu_q, cu_k, 100, 255, "max_seqlen_k"),
                                 (cu_q, cu_k, 99, 256, "max_seqlen_q"),
                                 (cu_q, cu_k + 5, 100, 300, "cu_seqlens_k"),
                                 (cu_q, cu_k[::-1].copy(), 100, 300, "cu_seqlens_k"),
                                 (cu_q, cu_k[None, :], 100, 256, "cu_seqlens_k"),
                                 (cu_q, cu_k[:-1], 100, 256, "entries")):
        with pytest.raises(SpillwayError) as e:
            spillway.flash_attn_varlen_func(q, kp, vp, cq, ck, mq, mk, 0.0, None, True,
                                            block_table=table)
        assert what in str(e.value), (what, str(e.value))


def _with_kvcache_ref(q, dk_list, dv_list, causal):
    """Per request b: q[b] over keys dk_list[b]; out [batch, sq, hq, d], lse
    [batch, hq, sq]."""
    batch, sq, hq, d = q.shape
    cu_q = np.arange(batch + 1) * sq
    cu_k = np.concatenate([[0], np.cumsum([len(x) for x in dk_list])])
    out, lse = ref_attention(q.reshape(-1, hq, d), np.concatenate(dk_list),
                             np.concatenate(dv_list), cu_q, cu_k, causal)
    return out.reshape(batch, sq, hq, d), lse.reshape(batch, sq, hq).transpose(0, 2, 1)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_with_kvcache_paged_appends_in_place(causal):
    rng = np.random.default_rng(13 + causal)
    page, hkv, hq, d = 16, 2, 8, 64
    cached, new = [37, 0, 16], 3
    # pages for cached + new tokens
    kp, vp, table, _, _ = _pool(rng, [n + new for n in cached], page, hkv, d)
    k0, v0 = kp.copy(), vp.copy()
    q = rng.standard_normal((3, new, hq, d)).astype(np.float32)
    kn = rng.standard_normal((3, new, hkv, d)).astype(np.float32)
    vn = rng.standard_normal((3, new, hkv, d)).astype(np.float32)
    out, lse = spillway.flash_attn_with_kvcache(q, kp, vp, kn, vn,
                                                cache_seqlens=np.array(cached, np.int32),
                                                block_table=table, causal=causal,
                                                return_softmax_lse=True)
    # the new tokens are in their pages; nothing else changed
    written = np.zeros(kp.shape[:2], bool)
    dk, dv = [], []
    for b, n in enumerate(cached):
        for j in range(n + new):
            p, o = table[b, j // page], j % page
            if j >= n:
                assert np.array_equal(kp[p, o], kn[b, j - n])
                assert np.array_equal(vp[p, o], vn[b, j - n])
                written[p, o] = True
        dk.append(np.stack([kp[table[b, j // page], j % page] for j in range(n + new)]))
        dv.append(np.stack([vp[table[b, j // page], j % page] for j in range(n + new)]))
    assert np.array_equal(kp[~written], k0[~written]) and np.array_equal(vp[~written], v0[~written])
    ref, rlse = _with_kvcache_ref(q, dk, dv, causal)
    assert out.shape == q.shape and lse.shape == (3, hq, new)
    assert rel_l2(out, ref) <= 1e-5
    assert np.allclose(lse, rlse, atol=1e-4)


def test_with_kvcache_contiguous_cache_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(21)
    S, hkv, hq, d = 300, 2, 4, 128  # 300 = 4 x 75: pages of 150
    kc = torch.from_numpy(rng.standard_normal((3, S, hkv, d)).astype(np.float32))
    vc = torch.from_numpy(rng.standard_normal((3, S, hkv, d)).astype(np.float32))
    lens = torch.tensor([299, 10], dtype=torch.int32)
    idx = torch.tensor([2, 0], dtype=torch.int32)  # requests use rows 2 and 0
    q = torch.from_numpy(rng.standard_normal((2, 1, hq, d)).astype(np.float32))
    kn = torch.from_numpy(rng.standard_normal((2, 1, hkv, d)).astype(np.float32))
    vn = torch.from_numpy(rng.standard_normal((2, 1, hkv, d)).astype(np.float32))
    kc0 = kc.clone()
    out = spillway.flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=lens,
                                           cache_batch_idx=idx, causal=True)
    assert torch.equal(kc[2, 299], kn[0, 0]) and torch.equal(kc[0, 10], kn[1, 0])
    assert torch.equal(kc[1], kc0[1])  # the row no request uses
    dk = [kc[2, :300].numpy(), kc[0, :11].numpy()]
    dv = [vc[2, :300].numpy(), vc[0, :11].numpy()]
    ref, _ = _with_kvcache_ref(q.numpy(), dk, dv, True)
    assert rel_l2(out.numpy(), ref) <= 1e-5
    # decode without new tokens: the whole cache by default
    out2 = spillway.flash_attn_with_kvcache(q[:1], kc[:1], vc[:1])
    ref2, _ = _with_kvcache_ref(q[:1].numpy(), [kc[0].numpy()], [vc[0].numpy()], False)
    assert rel_l2(out2.numpy(), ref2) <= 1e-5


def test_refusals_leave_the_cache_untouched():
    rng = np.random.default_rng(3)
    kp, vp, table, _, _ = _pool(rng, [20, 5], 16, 2, 64, spare=0)
    k0 = kp.copy()
    q = rng.standard_normal((2, 4, 4, 64)).astype(np.float32)
    kn = rng.standard_normal((2, 4, 2, 64)).astype(np.float32)
    # request 0 has 2 pages (32 tokens): 30 + 4 does not fit
    with pytest.raises(SpillwayError) as e:
        spillway.flash_attn_with_kvcache(q, kp, vp, kn, kn, cache_seqlens=[30, 1],
                                         block_table=table[:, :2])
    assert e.value.status == "SW_STATUS_INVALID" and "block_table row 0" in str(e.value)
    assert np.array_equal(kp, k0)
    # a page outside the pool, named by the library
    bad = table.copy()
    bad[1, 0] = kp.shape[0] + 5
    e = expect_error(
        lambda: spillway.paged_attention(q.reshape(-1, 4, 64), kp, vp, [0, 4, 8], [20, 5],
                                         bad), "SW_STATUS_INVALID")
    assert f"= {kp.shape[0] + 5} (request 1, its page 0) is out of range" in e.detail, e
    # a page twice in one request
    rep = table.copy()
    rep[0, 1] = rep[0, 0]
    e = expect_error(
        lambda: spillway.paged_attention(q.reshape(-1, 4, 64), kp, vp, [0, 4, 8], [20, 5],
                                         rep), "SW_STATUS_INVALID")
    assert f"request 0 holds page {table[0, 0]} twice" in e.detail, e
    # the same call with the table as built: runs
    spillway.paged_attention(q.reshape(-1, 4, 64), kp, vp, [0, 4, 8], [20, 5], table)
    for kw, what in (({"rotary_cos": np.ones(4), "rotary_sin": np.ones(4)},
                      "rotary embedding is not applied"),
                     ({"cache_leftpad": np.zeros(2, np.int32)},
                      "left-padded caches are not supported"),
                     ({"window_size": (8, 0)}, "sliding-window attention is not supported"),
                     ({"softcap": 30.0}, "soft-capping is not supported"),
                     ({"alibi_slopes": np.ones(4)}, "ALiBi biases are not supported")):
        e = expect_error(
            lambda: spillway.flash_attn_with_kvcache(q, kp, vp, kn, kn, cache_seqlens=[1, 1],
                                                     block_table=table, **kw),
            "SW_STATUS_UNSUPPORTED")
        assert what in e.detail, (kw, e)
    assert np.array_equal(kp, k0)
    # the same call without the option: runs (on copies: it appends)
    spillway.flash_attn_with_kvcache(q, kp.copy(), vp.copy(), kn, kn, cache_seqlens=[1, 1],
                                     block_table=table)


def test_tables_and_lengths_read_as_given_or_refused():
    # a table with no column reads nothing: refused as a row too short when a
    # request has keys (it read page 0 before), accepted when none has; float
    # lengths and cache rows are refused, not truncated
    rng = np.random.default_rng(5)
    kp, vp, table, _, _ = _pool(rng, [20, 5], 16, 2, 64)
    k0 = kp.copy()
    q = rng.standard_normal((2, 4, 64)).astype(np.float32)
    empty = np.zeros((2, 0), np.int32)
    with pytest.raises(SpillwayError) as e:
        spillway.paged_attention(q, kp, vp, [0, 1, 2], [0, 7], empty)
    assert e.value.status == "SW_STATUS_INVALID" and "block_table row 1" in e.value.detail
    kn = rng.standard_normal((2, 1, 2, 64)).astype(np.float32)
    with pytest.raises(SpillwayError) as e:
        spillway.flash_attn_with_kvcache(q[:, None], kp, vp, kn, kn, cache_seqlens=[0, 0],
                                         block_table=empty)
    assert "block_table row 0" in e.value.detail
    assert np.array_equal(kp, k0)
    out = spillway.paged_attention(q, kp, vp, [0, 1, 2], [0, 0], empty)
    assert np.all(out == 0)  # no key: zeros
    with pytest.raises(SpillwayError) as e:
        spillway.paged_attention(q, kp, vp, [0, 1, 2], np.array([5.9, 4.2]), table)
    assert "seq_lens must hold integers" in e.value.detail
    cache = rng.standard_normal((3, 32, 2, 64)).astype(np.float32)
    with pytest.raises(SpillwayError) as e:
        spillway.flash_attn_with_kvcache(q[:, None], cache, cache.copy(), cache_seqlens=[4, 4],
                                         cache_batch_idx=np.array([0.9, 2.5]))
    assert "cache_batch_idx must hold integers" in e.value.detail


def test_append_into_a_shared_page():
    # page 0 shared by both requests: request 0 may write past the tokens
    # request 1 holds there, not at or below them; two requests never write
    # one token; a cache row two requests use takes no append; a refused call
    # writes nothing
    rng = np.random.default_rng(8)
    kp = rng.standard_normal((4, 4, 1, 64)).astype(np.float32)
    vp = rng.standard_normal((4, 4, 1, 64)).astype(np.float32)
    q = rng.standard_normal((2, 1, 1, 64)).astype(np.float32)
    kn = rng.standard_normal((2, 1, 1, 64)).astype(np.float32)
    table = np.array([[0, 1], [0, 2]], np.int32)
    k0, v0 = kp.copy(), vp.copy()
    for lens, refusal in (([2, 1], None),  # writes token 2 and 1: 1 holds 0..1 after
                          ([2, 2], "request 1 appends to page 0 at token 2, which request 0 "
                                   "holds (block_table[0][0])"),
                          ([2, 3], "request 0 appends to page 0 at token 2, which request 1 "
                                   "holds")):
        kp[...], vp[...] = k0, v0
        if refusal is None:
            # (request 1 writes token 1 of page 0, request 0 holds 0..2: refused
            # too; only request 0 appends here)
            spillway.flash_attn_with_kvcache(q[:1], kp, vp, kn[:1], kn[:1],
                                             cache_seqlens=[2], block_table=table[:1])
            assert np.array_equal(kp[0, 2], kn[0, 0]) and np.array_equal(kp[0, :2], k0[0, :2])
            continue
        with pytest.raises(SpillwayError) as e:
            spillway.flash_attn_with_kvcache(q, kp, vp, kn, kn, cache_seqlens=lens,
                                             block_table=table)
        assert refusal in e.value.detail and "nothing written" in e.value.detail
        assert np.array_equal(kp, k0) and np.array_equal(vp, v0)
    # page 0 a full prefix both hold, each writing its own next page: accepted
    kp[...] = k0
    spillway.flash_attn_with_kvcache(q, kp, vp, kn, kn, cache_seqlens=[4, 5], block_table=table)
    assert np.array_equal(kp[1, 0], kn[0, 0]) and np.array_equal(kp[2, 1], kn[1, 0])
    assert np.array_equal(kp[0], k0[0])
    cache = rng.standard_normal((2, 8, 1, 64)).astype(np.float32)
    c0 = cache.copy()
    with pytest.raises(SpillwayError) as e:
        spillway.flash_attn_with_kvcache(q, cache, cache.copy(), kn, kn, cache_seqlens=[3, 3],
                                         cache_batch_idx=np.array([1, 1]))
    assert "cache_batch_idx" in e.value.detail and np.array_equal(cache, c0)


def test_appended_k_v_requiring_grad_refused():
    # the new k, v would be written by a tracked assignment and put the
    # caches on the autograd graph (every later call on them refused)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    kp, vp, table, _, _ = _pool(rng, [20, 5], 16, 2, 64)
    k0 = kp.copy()
    tk, tv = torch.from_numpy(kp), torch.from_numpy(vp)  # (share kp's, vp's memory)
    q = torch.from_numpy(rng.standard_normal((2, 1, 4, 64)).astype(np.float32))
    kn = torch.from_numpy(rng.standard_normal((2, 1, 2, 64)).astype(np.float32))
    kn.requires_grad_(True)
    with pytest.raises(SpillwayError) as e:
        spillway.flash_attn_with_kvcache(q, tk, tv, kn, kn.detach(),
                                         cache_seqlens=[19, 4], block_table=table)
    assert e.value.status == "SW_STATUS_UNSUPPORTED" and "grad" in e.value.detail
    assert not tk.requires_grad and np.array_equal(kp, k0)
    with torch.no_grad():
        spillway.flash_attn_with_kvcache(q, tk, tv, kn, kn, cache_seqlens=[19, 4],
                                         block_table=table)
    assert not tk.requires_grad


def test_every_refusal_comes_before_the_append():
    rng = np.random.default_rng(31)
    kp, vp, table, _, _ = _pool(rng, [20, 5], 16, 2, 64, spare=2)
    k0, v0 = kp.copy(), vp.copy()
    q = rng.standard_normal((2, 2, 4, 64)).astype(np.float32)
    kn = rng.standard_normal((2, 2, 2, 64)).astype(np.float32)
    rep = table.copy()
    rep[0, 1] = rep[0, 0]  # a cached page twice in request 0
    # an int64 table is taken when its entries fit int32 (the baseline below);
    # an entry past int32 is refused for its value, not cast (as int32 it would
    # wrap to table[0, 0], a page of request 0's)
    wide = table.astype(np.int64)
    wide[1, 0] = 2**32 + int(table[0, 0])
    cases = [
        (dict(block_table=rep), f"request 0 holds page {table[0, 0]} twice"),
        (dict(block_table=wide), "block_table must hold int32 page indices"),
        (dict(block_table=table, softmax_scale=float("nan")), "softmax_scale=nan"),
        (dict(block_table=table, q=q.astype(np.float16)),  # dtype differs from the cache
         "must share one dtype; got q float16, k float32"),
        (dict(block_table=table, q=rng.standard_normal((2, 2, 3, 64)).astype(np.float32)),
         "num_qo_heads=3 is not divisible by num_kv_heads=2"),
    ]
    # the baseline: the same calls without a fault run (on copies: they append),
    # the int64 table with entries that fit giving the int32 table's output
    outs = [spillway.flash_attn_with_kvcache(q, kp.copy(), vp.copy(), kn, kn,
                                             cache_seqlens=[18, 3], block_table=bt)
            for bt in (table, table.astype(np.int64))]
    assert np.array_equal(outs[0], outs[1])
    for kw, what in cases:
        args = dict(q=q, block_table=table)
        args.update(kw)
        e = expect_error(lambda: spillway.flash_attn_with_kvcache(args.pop("q"), kp, vp, kn, kn,
                                                                  cache_seqlens=[18, 3], **args),
                         "SW_STATUS_INVALID")
        assert what in e.detail, (kw, e)
        assert np.array_equal(kp, k0) and np.array_equal(vp, v0), kw
    # new tokens without cache_seqlens: refused, as FlashAttention does
    with pytest.raises(SpillwayError) as e:
        spillway.flash_attn_with_kvcache(q, kp[:2], vp[:2], kn, kn)
    assert e.value.status == "SW_STATUS_INVALID" and "cache_seqlens" in str(e.value)
    assert np.array_equal(kp, k0)
    # k or v of another dtype than the cache, fractional cache_seqlens, a
    # read-only cache: refused (FlashAttention refuses the first two too)
    for kw, what in ((dict(k=kn.astype(np.float16)), "got q float32, k float16, v float32"),
                     (dict(v=kn.astype(np.float64)), "got q float32, k float32, v float64"),
                     (dict(cache_seqlens=np.array([18.7, 3.2])),
                      "cache_seqlens must hold integers; got float64")):
        args = dict(k=kn, v=kn, cache_seqlens=[18, 3])
        args.update(kw)
        e = expect_error(
            lambda: spillway.flash_attn_with_kvcache(q, kp, vp, block_table=table, **args),
            "SW_STATUS_INVALID")
        assert what in e.detail, (kw, e)
        assert np.array_equal(kp, k0) and np.array_equal(vp, v0), kw
    # the same call with k, v of the cache's dtype and integer lengths: runs
    spillway.flash_attn_with_kvcache(q, kp.copy(), vp.copy(), block_table=table, k=kn, v=kn,
                                     cache_seqlens=[18, 3])
    vro = vp.copy()
    vro.setflags(write=False)
    with pytest.raises(SpillwayError) as e:
        spillway.flash_attn_with_kvcache(q, kp, vro, kn, kn, cache_seqlens=[18, 3],
                                         block_table=table)
    assert "writable" in str(e.value)
    assert np.array_equal(kp, k0)


def test_a_run_refused_after_the_append_restores_the_cache():
    # a cache whose rows are not 16-byte aligned passes every check made
    # before the append and is refused by the run (SW_STATUS_MISALIGNED):
    # the positions written go back to what they held
    rng = np.random.default_rng(41)
    n = 16 * 1 * 64  # elements of each cache
    raw_k = np.zeros(2 * n + 2, np.uint8)
    raw_v = np.zeros(2 * n + 2, np.uint8)
    kc = raw_k[1:1 + 2 * n].view(np.float16).reshape(1, 16, 1, 64)
    vc = raw_v[1:1 + 2 * n].view(np.float16).reshape(1, 16, 1, 64)
    kc[...] = rng.standard_normal(kc.shape)
    vc[...] = rng.standard_normal(vc.shape)
    k0, v0 = kc.copy(), vc.copy()
    q = rng.standard_normal((1, 1, 1, 64)).astype(np.float16)
    kn = rng.standard_normal((1, 1, 1, 64)).astype(np.float16)
    with pytest.raises(SpillwayError) as e:
        spillway.flash_attn_with_kvcache(q, kc, vc, kn, kn, cache_seqlens=[3])
    assert e.value.status == "SW_STATUS_MISALIGNED", e.value
    assert np.array_equal(kc, k0) and np.array_equal(vc, v0)


def test_strided_contiguous_cache_gets_both_appends():
    # k contiguous (its reshape to pages is a view), v a slice of a wider
    # buffer (its reshape copies): both must receive the new tokens
    rng = np.random.default_rng(37)
    S, hkv, d = 300, 2, 64
    kc = rng.standard_normal((2, S, hkv, d)).astype(np.float32)
    vbig = rng.standard_normal((2, S + 20, hkv, d)).astype(np.float32)
    vc = vbig[:, :S]
    q = rng.standard_normal((2, 1, 4, d)).astype(np.float32)
    kn = rng.standard_normal((2, 1, hkv, d)).astype(np.float32)
    vn = rng.standard_normal((2, 1, hkv, d)).astype(np.float32)
    out = spillway.flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=[7, 299])
    assert np.array_equal(kc[0, 7], kn[0, 0]) and np.array_equal(kc[1, 299], kn[1, 0])
    assert np.array_equal(vc[0, 7], vn[0, 0]) and np.array_equal(vc[1, 299], vn[1, 0])
    ref, _ = _with_kvcache_ref(q, [kc[0, :8], kc[1, :300]], [vc[0, :8], vc[1, :300]], False)
    assert rel_l2(out, ref) <= 1e-5


def test_broadcast_pool_refused():
    rng = np.random.default_rng(41)
    one = rng.standard_normal((1, 16, 2, 64)).astype(np.float32)
    pool = np.broadcast_to(one, (4, 16, 2, 64))  # page stride 0
    q = rng.standard_normal((1, 4, 64)).astype(np.float32)
    with pytest.raises(SpillwayError) as e:
        spillway.paged_attention(q, pool, pool, [0, 1], [40], [[0, 1, 2]])
    assert e.value.status == "SW_STATUS_INVALID" and "stride of 0" in str(e.value)


# ------------------------------------------------------------ torch CUDA --
# (the cuda_torch fixture: conftest.py)


@pytest.mark.gpu
@pytest.mark.parametrize("page", [1, 16, 256])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("q_lens", [[1, 1, 0, 1, 1], [5, 0, 1, 17, 3]], ids=["decode", "chunks"])
def test_paged_attention_cuda(cuda_torch, page, layout, q_lens):
    torch = cuda_torch
    rng = np.random.default_rng(page * 5 + (layout == "HND") + 2 * len(q_lens))
    kv_lens = [3000, 0, 1, 17, 129]
    hq, hkv, d = 8, 2, 128
    kp, vp, table, dk, dv = _pool(rng, kv_lens, page, hkv, d, layout)
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(kv_lens)]).astype(np.int32)
    q = rng.standard_normal((int(cu_q[-1]), hq, d)).astype(np.float32)
    tb = lambda a: torch.from_numpy(a).to("cuda").to(torch.bfloat16)
    for causal in (False, True):
        out, lse = spillway.paged_attention(tb(q), tb(kp), tb(vp), cu_q, kv_lens,
                                            torch.from_numpy(table), causal=causal,
                                            return_lse=True, layout=layout)
        assert out.device.type == "cuda" and out.dtype == torch.bfloat16
        torch.cuda.synchronize()
        rq, rk, rv = (tb(a).float().cpu().numpy() for a in (q, dk, dv))
        ref, rlse = ref_attention(rq, rk, rv, cu_q, cu_k, causal)
        assert rel_l2(out.float().cpu().numpy(), ref) <= 1e-2
        lse = lse.cpu().numpy()
        fin = np.isfinite(rlse)
        assert np.allclose(lse[fin], rlse[fin], atol=2e-2)
        assert np.all(np.isneginf(lse[~fin]))


@pytest.mark.gpu
def test_with_kvcache_cuda_matches_cpu(cuda_torch):
    """The same step on CUDA and CPU tensors: the same appended cache, and
    outputs within bf16 rounding."""
    torch = cuda_torch
    rng = np.random.default_rng(31)
    page, hkv, hq, d = 16, 8, 32, 128
    cached, new = [2000, 15, 0, 64], 1
    kp, vp, table, _, _ = _pool(rng, [n + new for n in cached], page, hkv, d)
    q = rng.standard_normal((4, new, hq, d)).astype(np.float32)
    kn = rng.standard_normal((4, new, hkv, d)).astype(np.float32)
    vn = rng.standard_normal((4, new, hkv, d)).astype(np.float32)
    tb = lambda a, dev: torch.from_numpy(a).to(dev).to(torch.bfloat16)
    res = {}
    for dev in ("cpu", "cuda"):
        k_cache, v_cache = tb(kp, dev), tb(vp, dev)
        out = spillway.flash_attn_with_kvcache(
            tb(q, dev), k_cache, v_cache, tb(kn, dev), tb(vn, dev),
            cache_seqlens=torch.tensor(cached, dtype=torch.int32, device=dev),
            block_table=torch.from_numpy(table).to(dev), causal=True)
        res[dev] = (out.float().cpu(), k_cache.cpu(), v_cache.cpu())
    assert torch.equal(res["cpu"][1], res["cuda"][1]) and torch.equal(res["cpu"][2], res["cuda"][2])
    assert rel_l2(res["cuda"][0].numpy(), res["cpu"][0].numpy()) <= 1e-2


@pytest.mark.gpu
def test_paged_cuda_refusals(cuda_torch):
    torch = cuda_torch
    rng = np.random.default_rng(3)
    kp, vp, table, _, _ = _pool(rng, [40], 16, 2, 64)
    q = torch.zeros((1, 4, 64), dtype=torch.bfloat16, device="cuda")
    k = torch.from_numpy(kp).to(torch.bfloat16)
    v = torch.from_numpy(vp).to(torch.bfloat16)
    with pytest.raises(SpillwayError, match="one device"):
        spillway.paged_attention(q, k, v, [0, 1], [40], table)
    with pytest.raises(SpillwayError, match="runs on the host"):
        spillway.paged_attention(q, k.cuda(), v.cuda(), [0, 1], [40], table, backend="cpu")
    bad = table.copy()
    bad[0, 0] = 10_000
    with pytest.raises(SpillwayError, match="out of range"):
        spillway.paged_attention(q, k.cuda(), v.cuda(), [0, 1], [40], bad)


@pytest.mark.gpu
def test_paged_cuda_calls_run_ahead_of_the_device(cuda_torch):
    """Paged calls plan every call and destroy the plan at its end. Behind a
    busy stream, a loop of them returns before the device reaches them: the
    plans' pinned tables go back to the library's staging pool instead of
    cudaFreeHost, which waits for the device. Each call reads its own
    tables, also when its buffer was an earlier call's (taken again only
    once that call's upload ran): the tables change every call."""
    torch = cuda_torch
    if not hasattr(torch.cuda, "_sleep"):
        pytest.skip("torch.cuda._sleep is needed to hold the stream busy")
    rng = np.random.default_rng(53)
    page, hkv, hq, d = 16, 2, 8, 128
    lens = [700, 40, 1500, 90]
    kp, vp, table, _, _ = _pool(rng, lens, page, hkv, d)
    kc = torch.from_numpy(kp).to("cuda", torch.bfloat16)
    vc = torch.from_numpy(vp).to("cuda", torch.bfloat16)
    kf, vf = kc.float().cpu().numpy(), vc.float().cpu().numpy()
    cu_q = np.arange(len(lens) + 1, dtype=np.int32)  # decode: one query a request
    calls = 28
    qs = [torch.randn(len(lens), hq, d, dtype=torch.bfloat16, device="cuda")
          for _ in range(calls)]

    def tables(i):  # requests in another order and a few keys shorter every call
        order = np.roll(np.arange(len(lens)), i)
        return np.array([lens[b] - 3 * (i % 10) for b in order], np.int32), table[order]

    def run(calls):
        return [spillway.paged_attention(qs[i], kc, vc, cu_q, *tables(i)) for i in calls]

    torch.cuda.synchronize()
    torch.cuda._sleep(400_000_000)
    outs = run(range(8))  # the pool's buffers of this size, as a decode loop's first steps
    torch.cuda.synchronize()
    torch.cuda._sleep(400_000_000)
    outs += run(range(8, 14))
    returned_ahead = not torch.cuda.current_stream().query()
    torch.cuda._sleep(400_000_000)
    outs += run(range(14, calls))  # past the class's 8: calls wait for the oldest upload
    torch.cuda.synchronize()
    assert returned_ahead, "the paged calls waited for the device"
    for i, out in enumerate(outs):
        want = spillway.paged_attention(qs[i].float().cpu().numpy(), kf, vf, cu_q, *tables(i))
        assert rel_l2(out.float().cpu().numpy(), want) <= 1e-2, f"call {i}"


@pytest.mark.gpu
def test_with_kvcache_cuda_decode_loop_and_capture(cuda_torch):
    """A decode loop of flash_attn_with_kvcache calls on CUDA, every step
    against the CPU path; a call under CUDA graph capture is refused before
    it reads or appends anything."""
    torch = cuda_torch
    rng = np.random.default_rng(47)
    page, hkv, hq, d, steps = 16, 2, 8, 64, 24
    cached = [40, 3]
    kp, vp, table, _, _ = _pool(rng, [n + steps for n in cached], page, hkv, d)
    kc = torch.from_numpy(kp).to("cuda").to(torch.bfloat16)
    vc = torch.from_numpy(vp).to("cuda").to(torch.bfloat16)
    tab = torch.from_numpy(table).to("cuda")
    kc_cpu, vc_cpu = kc.cpu(), vc.cpu()
    lens = list(cached)
    for step in range(steps):
        q = torch.randn(2, 1, hq, d, dtype=torch.bfloat16, device="cuda")
        kn = torch.randn(2, 1, hkv, d, dtype=torch.bfloat16, device="cuda")
        vn = torch.randn(2, 1, hkv, d, dtype=torch.bfloat16, device="cuda")
        out = spillway.flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=lens,
                                               block_table=tab, causal=True)
        want = spillway.flash_attn_with_kvcache(q.cpu(), kc_cpu, vc_cpu, kn.cpu(), vn.cpu(),
                                                cache_seqlens=lens, block_table=table,
                                                causal=True)
        assert rel_l2(out.float().cpu().numpy(), want.float().numpy()) <= 1e-2, step
        lens = [n + 1 for n in lens]
    torch.cuda.synchronize()
    # under capture: refused, nothing appended
    before = kc.clone()
    s = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(s):
        q = torch.randn(2, 1, hq, d, dtype=torch.bfloat16, device="cuda")
        kn = torch.randn(2, 1, hkv, d, dtype=torch.bfloat16, device="cuda")
    s.synchronize()
    with pytest.raises(SpillwayError) as e:
        with torch.cuda.graph(g, stream=s):
            spillway.flash_attn_with_kvcache(q, kc, vc, kn, kn, cache_seqlens=lens,
                                             block_table=tab, causal=True)
    assert "captured" in str(e.value)
    assert torch.equal(kc, before)


def test_pools_the_library_cannot_address_are_refused():
    # a numpy pool whose strides are not whole elements (a field of a packed
    # record array: 129-byte tokens) is refused, not read at floored strides;
    # its contiguous copy is right
    rng = np.random.default_rng(43)
    kp, vp, table, dk, dv = _pool(rng, [20, 5], 16, 1, 64)
    rec = np.zeros(kp.shape[:3], dtype=[("k", np.float32, 64), ("pad", np.uint8)])
    rec["k"] = kp
    kf = rec["k"]
    assert kf.strides[2] % 4 != 0 or kf.strides[1] % 4 != 0
    q = rng.standard_normal((2, 2, 64)).astype(np.float32)
    cu_q = np.array([0, 1, 2], dtype=np.int32)
    with pytest.raises(SpillwayError) as e:
        spillway.paged_attention(q, kf, vp, cu_q, [20, 5], table)
    assert e.value.status == "SW_STATUS_INVALID" and "strides" in str(e.value)
    out = spillway.paged_attention(q, np.ascontiguousarray(kf), vp, cu_q, [20, 5], table)
    want = spillway.paged_attention(q, kp, vp, cu_q, [20, 5], table)
    assert np.array_equal(out, want)
    torch = pytest.importorskip("torch")
    meta = [torch.empty(x.shape, device="meta") for x in (q, kp, vp)]
    with pytest.raises(SpillwayError) as e:
        spillway.paged_attention(*meta, cu_q, [20, 5], table)
    assert "CUDA or CPU" in str(e.value)

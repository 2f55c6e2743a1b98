"""spillway.Store and spillway.SwapEngine: the block store and the swap engine
from Python, against the float64 reference (sw_ref.py): attention over blocks
offloaded to a store on disk, through a pool that holds a quarter of them,
equals attention over the whole cache. Failure paths on purpose: bad shapes,
closed handles, a missing store, unknown sequences, a device pool without a
GPU. Seeds are in the test ids or the messages."""

import os

import numpy as np
import pytest

import spillway
from spillway.swap import bf16_bits_to_f32, f32_to_bf16_bits
from sw_ref import expect_error, ref_attention, rel_l2

TOL = 1e-2  # BF16 output against the float64 reference (DESIGN.md)


def _torch_or_skip():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed")
    return torch


# ------------------------------------------------------------------ store --

def test_store_write_read_delete_reopen(tmp_path):
    path = tmp_path / "store"
    rng = np.random.default_rng(5)
    blobs = {spillway.StoreKey(3, layer, block, head, kind):
             rng.integers(0, 256, size=int(rng.integers(1, 4096)), dtype=np.uint8).tobytes()
             for layer in range(2) for block in range(3) for head in range(2) for kind in "KV"}
    with spillway.Store(path, capacity_bytes=16 << 20) as st:
        gens = [st.write(key, data) for key, data in blobs.items()]
        assert gens == sorted(gens) and len(set(gens)) == len(gens)
        keys = list(blobs)
        assert st.read(keys) == [blobs[k] for k in keys]
        assert st.read(keys[3]) == blobs[keys[3]]
        stats = st.get_stats()
        assert isinstance(stats, dict) and stats["writes"] == len(blobs)
        assert stats["payload_bytes"] == sum(len(b) for b in blobs.values())
        assert isinstance(stats["io_backend"], str) and "struct_size" not in stats
        st.delete(keys[0])
        e = expect_error(lambda: st.read(keys[:2]), "SW_STATUS_NOT_FOUND")
        assert "index 0" in e.detail
        expect_error(lambda: st.delete(keys[0]), "SW_STATUS_NOT_FOUND")
        assert st.verify()["status"] == "SW_OK"
    assert st.closed
    # Reopened (create=False): what was written is still there.
    with spillway.Store(path, create=False) as st:
        assert st.read(keys[1:]) == [blobs[k] for k in keys[1:]]
        assert st.get_stats()["extents_used"] == len(blobs) - 1
        # a batch of deletes: the key already gone and a repeat are False
        gone = st.delete_batch([keys[0], keys[1], keys[2], keys[1]])
        assert gone == [False, True, True, False]
        expect_error(lambda: st.read(keys[1]), "SW_STATUS_NOT_FOUND")
        assert st.read(keys[3:]) == [blobs[k] for k in keys[3:]]
        assert st.get_stats()["deletes"] == 2
        assert st.delete_batch([]) == []
        expect_error(lambda: st.delete_batch([keys[3], (3, 0, 0, 0, "X")]), "SW_STATUS_INVALID")
        assert st.read(keys[3]) == blobs[keys[3]]


def test_store_reopens_with_its_own_geometry(tmp_path):
    # a store made with other than the default stripe and run sizes reopens
    # without repeating them (the binding sent the defaults: refused), and
    # a geometry given that is not the store's is refused
    path = tmp_path / "geo"
    with spillway.Store(path, capacity_bytes=4 << 20, stripe_bytes=4096, run_blocks=8) as st:
        st.write((1, 0, 0, 0, "K"), b"x" * 100)
    with spillway.Store(path, create=False) as st:
        assert st.stripe_bytes == 4096 and st.read((1, 0, 0, 0, "K")) == b"x" * 100
    expect_error(lambda: spillway.Store(path, create=False, stripe_bytes=8192), "SW_STATUS_INVALID")


def test_store_missing_directory(tmp_path):
    e = expect_error(
        lambda: spillway.Store(tmp_path / "absent", create=False), "SW_STATUS_NOT_FOUND")
    assert "absent" in str(e)
    # the parent must exist: its errno (ENOENT) and the path in the detail
    missing = tmp_path / "no" / "parent"
    e = expect_error(lambda: spillway.Store(missing, capacity_bytes=1 << 20), "SW_STATUS_IO")
    assert "mkdir" in e.detail and "(errno 2)" in e.detail and str(missing) in e.detail, e


def test_store_closed_handle(tmp_path):
    st = spillway.Store(tmp_path / "s", capacity_bytes=4 << 20)
    st.write((1, 0, 0, 0, "V"), b"x")
    st.close()
    st.close()  # idempotent
    for fn in (lambda: st.write((1, 0, 0, 0, "V"), b"y"), lambda: st.read((1, 0, 0, 0, "V")),
               lambda: st.delete((1, 0, 0, 0, "V")), st.get_stats, st.verify):
        e = expect_error(fn, "SW_STATUS_INVALID")
        assert "closed" in e.detail

    def enter():
        with st:
            pass
    e = expect_error(enter, "SW_STATUS_INVALID")  # `with` on a closed store
    assert "closed" in e.detail


def test_store_bad_arguments(tmp_path):
    with spillway.Store(tmp_path / "s", capacity_bytes=4 << 20) as st:
        expect_error(lambda: st.write((1, 0, 0, 0, "X"), b"x"), "SW_STATUS_INVALID")
        expect_error(lambda: st.write((1, -1, 0, 0, "K"), b"x"), "SW_STATUS_INVALID")
        expect_error(lambda: st.write((1, 0, 0, 1 << 16, "K"), b"x"), "SW_STATUS_INVALID")
        expect_error(lambda: st.write((1, 0, 0), b"x"), "SW_STATUS_INVALID")
        big = bytes(st.stripe_bytes + 1)
        e = expect_error(lambda: st.write((1, 0, 0, 0, "K"), big), "SW_STATUS_INVALID")
        assert str(st.stripe_bytes) in e.detail  # the library's own sentence
        expect_error(
            lambda: spillway.Store(tmp_path / "t", capacity_bytes=1 << 20, durability="never"),
            "SW_STATUS_INVALID")
    # creating without a capacity: the library refuses with its message
    expect_error(lambda: spillway.Store(tmp_path / "u"), "SW_STATUS_INVALID")


def test_store_refuses_nul_in_path_and_wrapping_config(tmp_path):
    """A path with an embedded NUL would open the directory before it (a C
    string ends there); config integers past their C type would wrap."""
    bad = str(tmp_path / "a") + "\0evil"
    e = expect_error(lambda: spillway.Store(bad, capacity_bytes=4 << 20), "SW_STATUS_INVALID")
    assert "NUL" in e.detail and "path" in e.detail
    expect_error(
        lambda: spillway.Store(os.fsencode(bad), capacity_bytes=4 << 20), "SW_STATUS_INVALID")
    assert not (tmp_path / "a").exists()
    for name, val in (("capacity_bytes", -1), ("capacity_bytes", 1 << 64),
                      ("capacity_bytes", float(4 << 20)), ("stripe_bytes", (1 << 32) + 4096),
                      ("lock_wait_ms", 1 << 31)):
        kw = dict({"capacity_bytes": 4 << 20}, **{name: val})
        e = expect_error(lambda: spillway.Store(tmp_path / "b", **kw), "SW_STATUS_INVALID")
        assert e.detail.startswith(name + "="), e.detail
    assert not (tmp_path / "b").exists()


# ------------------------------------------------------------------- swap --

SHAPE = dict(num_layers=2, num_kv_heads=2, num_qo_heads=8, head_dim=64, block_size=16)


def _bf16(x):
    """float32 values exactly representable in BF16 (what the engine stores)."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


def _kv(rng, tokens):
    shp = (tokens, SHAPE["num_kv_heads"], SHAPE["head_dim"])
    return _bf16(rng.standard_normal(shp).astype(np.float32)), \
        _bf16(rng.standard_normal(shp).astype(np.float32))


def _q(rng, rows):
    shp = (rows, SHAPE["num_qo_heads"], SHAPE["head_dim"])
    return _bf16(rng.standard_normal(shp).astype(np.float32))


def _ref(q, k, v, causal=True):
    return ref_attention(q, k, v, [0, q.shape[0]], [0, k.shape[0]], causal)


def _as(kind, x):
    if kind == "f32":
        return x
    if kind == "bits":
        return f32_to_bf16_bits(x)
    torch = _torch_or_skip()
    return torch.from_numpy(x).to(torch.bfloat16)


def _to_f64(x):
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        return x.float().numpy().astype(np.float64)
    if x.dtype == np.uint16:
        return bf16_bits_to_f32(x).astype(np.float64)
    return np.asarray(x, dtype=np.float64)


@pytest.mark.parametrize("kind", ["f32", "bits", "torch"])
def test_swap_attend_equals_attention_over_the_whole_cache(tmp_path, kind):
    seed = {"f32": 101, "bits": 102, "torch": 103}[kind]
    rng = np.random.default_rng(seed)
    lens = {11: 100, 12: 37}  # not multiples of the block size
    blocks = sum(-(-n // SHAPE["block_size"]) for n in lens.values())
    cache = {(s, layer): _kv(rng, n) for s, n in lens.items() for layer in range(2)}
    with spillway.Store(tmp_path / "kv", capacity_bytes=32 << 20) as st, \
            spillway.SwapEngine(st, resident_blocks=max(1, blocks // 4), policy="score",
                                **SHAPE) as eng:
        for s in lens:
            eng.seq_add(s, ns=9, block_base=1000 * s, max_blocks=64)
        for (s, layer), (k, v) in cache.items():
            n = eng.offload_tokens(s, layer, _as(kind, k), _as(kind, v))
            assert n == -(-lens[s] // SHAPE["block_size"])
            assert eng.seq_length(s, layer) == (lens[s], n)
        for layer in range(2):
            # decode: one row per sequence
            q = _q(rng, 2)
            out, lse = eng.attend(layer, [11, 12], _as(kind, q), return_lse=True)
            assert tuple(out.shape) == q.shape
            assert eng.last_attend["blocks_total"] == blocks
            for i, s in enumerate(lens):
                ro, rl = _ref(q[i:i + 1], *cache[(s, layer)])
                err = rel_l2(_to_f64(out[i:i + 1]), ro)
                assert err <= TOL, f"seed={seed} layer={layer} seq={s} rel L2 {err:.3g}"
                assert np.max(np.abs(np.asarray(lse[i:i + 1], dtype=np.float64) - rl)) < 2e-2
            # a prefill chunk of 5 rows of sequence 11 (causal, the last rows)
            q = _q(rng, 5)
            out = eng.attend(layer, 11, _as(kind, q))
            ro, _ = _ref(q, *cache[(11, layer)])
            err = rel_l2(_to_f64(out), ro)
            assert err <= TOL, f"seed={seed} layer={layer} chunk rel L2 {err:.3g}"
        stats = eng.get_stats()
        assert stats["misses"] > 0 and stats["evictions"] > 0  # blocks came from the store
        assert stats["bytes_read"] > 0 and stats["policy"] == "score"
        assert stats["resident_blocks"] == max(1, blocks // 4)


def test_swap_decode_appends_into_a_partial_block(tmp_path):
    seed = 201
    rng = np.random.default_rng(seed)
    bs = SHAPE["block_size"]
    k, v = _kv(rng, 40)
    with spillway.Store(tmp_path / "kv", capacity_bytes=16 << 20) as st, \
            spillway.SwapEngine(st, resident_blocks=2, **SHAPE) as eng:
        eng.seq_add(1, ns=1, max_blocks=16)
        for layer in range(2):
            eng.offload_tokens(1, layer, k[:37], v[:37])
        for t in range(37, 40):  # each step rewrites the growing last block
            blk = t // bs
            for layer in range(2):
                eng.offload(1, layer, blk, k[blk * bs:t + 1].transpose(1, 0, 2),
                            v[blk * bs:t + 1].transpose(1, 0, 2))
            assert eng.seq_length(1, 0) == (t + 1, blk + 1)
            q = _q(rng, 1)
            out = eng.attend(1, 1, q)
            ro, _ = _ref(q, k[:t + 1], v[:t + 1])
            assert rel_l2(out, ro) <= TOL, f"seed={seed} step {t}"
        scores = eng.score_blocks(1, 0, _q(rng, 1))
        assert scores.shape == (3,) and np.all(np.isfinite(scores))
        eng.seq_remove(1, delete_stripes=True)
        expect_error(lambda: eng.seq_length(1, 0), "SW_STATUS_NOT_FOUND")
    assert st.closed


def _page_pool(x, pages, bs, nhd, pad=8):
    """x [tokens, Hkv, d] into a padded page pool (NaN padding, never read):
    NHD [pages, bs, Hkv, d + pad] or HND [pages, Hkv, bs + 1, d + pad]; the
    block views of page i as offload takes them."""
    t, h, d = x.shape
    bits = f32_to_bf16_bits(x)
    if nhd:
        pool = np.full((pages, bs, h, d + pad), 0x7FC0, np.uint16)
    else:
        pool = np.full((pages, h, bs + 1, d + pad), 0x7FC0, np.uint16)
    views = []
    for i in range(pages):
        n = min(bs, t - i * bs)
        rows = bits[i * bs:i * bs + n]
        if nhd:
            pool[i, :n, :, :d] = rows
            views.append(pool[i, :n, :, :d])
        else:
            pool[i, :, :n, :d] = rows.transpose(1, 0, 2)
            views.append(pool[i, :, :n, :d])
    return pool, views


def test_swap_offload_layouts_and_batch_give_the_same_bytes(tmp_path):
    """Blocks handed over as NHD pages, HND pages with padded strides, one
    batch per layer, or one block per call: the engine stores the same
    stripes, so attention and scores are the same bytes; a batch whose item
    is malformed writes nothing and names the item."""
    seed = 211
    rng = np.random.default_rng(seed)
    bs, tokens = SHAPE["block_size"], 75
    pages = (tokens + bs - 1) // bs
    k, v = _kv(rng, tokens)
    q = _q(rng, 2)
    outs = []
    with spillway.Store(tmp_path / "kv", capacity_bytes=32 << 20) as st:
        for way in range(3):
            with spillway.SwapEngine(st, resident_blocks=2, **SHAPE) as eng:
                eng.seq_add(1, ns=10 + way, max_blocks=16)
                for layer in range(2):
                    if way == 0:  # dense HND, one call a block
                        for i in range(pages):
                            eng.offload(1, layer, i, k[i * bs:(i + 1) * bs].transpose(1, 0, 2),
                                        v[i * bs:(i + 1) * bs].transpose(1, 0, 2))
                    else:  # page pools, one batch a layer
                        nhd = way == 1
                        kp, kv_ = _page_pool(k, pages, bs, nhd)
                        vp, vv = _page_pool(v, pages, bs, nhd)
                        assert not kv_[0].flags.c_contiguous
                        n = eng.offload_batch([(1, layer, i, kv_[i], vv[i]) for i in range(pages)],
                                              layout="NHD" if nhd else "HND")
                        assert n == pages
                assert eng.seq_length(1, 1) == (tokens, pages)
                out, lse = eng.attend(1, 1, q, return_lse=True)
                outs.append((np.asarray(out), np.asarray(lse), eng.score_blocks(1, 0, q)))
                if way == 2:
                    eng.seq_add(2, ns=20, max_blocks=16)
                    kp, kv_ = _page_pool(k, pages, bs, True)
                    items = [(2, 0, i, kv_[i], kv_[i]) for i in range(3)]
                    items[2] = (2, 0, 2, kv_[2][:, :1], kv_[2])
                    e = expect_error(
                        lambda: eng.offload_batch(items, layout="NHD"), "SW_STATUS_INVALID")
                    assert "has shape" in e.detail
                    assert eng.seq_length(2, 0) == (0, 0)
                    items[2] = (2, 0, 4, kv_[2], kv_[2])  # a gap: the first two stay
                    e = expect_error(
                        lambda: eng.offload_batch(items, layout="NHD"), "SW_STATUS_INVALID")
                    assert "item 2: block 4" in e.detail and "2 offloaded" in e.detail
                    assert eng.seq_length(2, 0) == (2 * bs, 2)
                    expect_error(
                        lambda: eng.offload_batch(items, layout="THD"), "SW_STATUS_INVALID")
    ro, _ = _ref(q, k, v)
    assert rel_l2(outs[0][0], ro) <= TOL, f"seed={seed}"
    for o, l, sc in outs[1:]:
        assert np.array_equal(o, outs[0][0]) and np.array_equal(l, outs[0][1])
        assert np.array_equal(sc, outs[0][2])


_ATTACH_CHILD = r"""
import sys
import numpy as np
import spillway
path, seed = sys.argv[1], int(sys.argv[2])
shape = dict(num_layers=2, num_kv_heads=2, num_qo_heads=8, head_dim=64, block_size=16)
rng = np.random.default_rng(seed)
def bf16(x):
    return spillway.swap.bf16_bits_to_f32(spillway.swap.f32_to_bf16_bits(x))
k = bf16(rng.standard_normal((75, 2, 64)).astype(np.float32))
v = bf16(rng.standard_normal((75, 2, 64)).astype(np.float32))
q = bf16(rng.standard_normal((2, 8, 64)).astype(np.float32))
with spillway.Store(path, capacity_bytes=16 << 20) as st, \
        spillway.SwapEngine(st, resident_blocks=2, persist_manifests=True, **shape) as eng:
    eng.seq_add(5, ns=3, block_base=100, max_blocks=32)
    for layer in range(2):
        eng.offload_tokens(5, layer, k, v)
    out, lse = eng.attend(1, 5, q, return_lse=True)
    np.save(path + ".out.npy", spillway.swap.f32_to_bf16_bits(np.asarray(out, np.float32)))
    np.save(path + ".lse.npy", np.asarray(lse))
"""


def test_swap_attach_in_a_new_process(tmp_path):
    """A process offloads a sequence and exits; this one attaches it: the
    same attention, bit for bit; a K stripe rewritten since is refused."""
    import subprocess
    import sys
    path = str(tmp_path / "kv")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(
        spillway.__file__)), env.get("PYTHONPATH", "")] if p)
    subprocess.run([sys.executable, "-c", _ATTACH_CHILD, path, "77"], check=True, env=env)
    rng = np.random.default_rng(77)
    k = _bf16(rng.standard_normal((75, 2, 64)).astype(np.float32))
    v = _bf16(rng.standard_normal((75, 2, 64)).astype(np.float32))
    q = _bf16(rng.standard_normal((2, 8, 64)).astype(np.float32))
    with spillway.Store(path, capacity_bytes=16 << 20) as st:
        with spillway.SwapEngine(st, resident_blocks=2, **SHAPE) as eng:
            eng.seq_attach(5, ns=3, block_base=100, max_blocks=32)
            assert eng.seq_length(5, 0) == (75, 5) and eng.seq_length(5, 1) == (75, 5)
            out, lse = eng.attend(1, 5, q, return_lse=True)
            assert np.array_equal(f32_to_bf16_bits(np.asarray(out, np.float32)),
                                  np.load(path + ".out.npy"))
            assert np.array_equal(np.asarray(lse), np.load(path + ".lse.npy"))
            ro, _ = _ref(q, k, v)
            assert rel_l2(_to_f64(out), ro) <= TOL
        st.write(spillway.StoreKey(3, 0, 102, 1, "K"), b"\0" * (16 * 64 * 2))
        with spillway.SwapEngine(st, resident_blocks=2, **SHAPE) as eng:
            e = expect_error(lambda: eng.seq_attach(5, ns=3, block_base=100, max_blocks=32),
                             "SW_STATUS_CORRUPT")
            assert "layer 0 block 2: K stripe of kv head 1" in e.detail
            expect_error(lambda: eng.seq_length(5, 0), "SW_STATUS_NOT_FOUND")


def test_swap_failure_paths(tmp_path):
    rng = np.random.default_rng(301)
    with spillway.Store(tmp_path / "kv", capacity_bytes=16 << 20) as st:
        eng = spillway.SwapEngine(st, resident_blocks=4, **SHAPE)
        eng.seq_add(5, ns=2, max_blocks=8)
        k, v = _kv(rng, 20)
        eng.offload_tokens(5, 0, k, v)
        # bad shapes (found by the binding: the library cannot see them)
        e = expect_error(lambda: eng.offload_tokens(5, 1, k[:, :1], v[:, :1]), "SW_STATUS_INVALID")
        assert "num_kv_heads=2" in e.detail
        expect_error(
            lambda: eng.offload(5, 1, 0, k[:17].transpose(1, 0, 2), v[:17].transpose(1, 0, 2)),
            "SW_STATUS_INVALID")
        expect_error(
            lambda: eng.offload(5, 1, 0, k[:4].transpose(1, 0, 2), v[:5].transpose(1, 0, 2)),
            "SW_STATUS_INVALID")
        e = expect_error(lambda: eng.attend(0, 5, _q(rng, 1)[:, :4]), "SW_STATUS_INVALID")
        assert "num_qo_heads=8" in e.detail
        expect_error(lambda: eng.attend(0, [5, 5], _q(rng, 3)), "SW_STATUS_INVALID")
        expect_error(lambda: eng.attend(0, 5, _q(rng, 3), q_indptr=[0, 2]), "SW_STATUS_INVALID")
        expect_error(lambda: eng.attend(0, 5, _q(rng, 1).astype(np.int32)), "SW_STATUS_INVALID")
        # found by the library, with its sentence
        e = expect_error(lambda: eng.attend(0, 77, _q(rng, 1)), "SW_STATUS_NOT_FOUND")
        e = expect_error(lambda: eng.attend(7, 5, _q(rng, 1)), "SW_STATUS_INVALID")
        assert "layer" in e.detail
        expect_error(lambda: eng.attend(0, [5, 5], _q(rng, 2)), "SW_STATUS_INVALID")  # listed twice
        expect_error(lambda: eng.seq_add(5, ns=2, max_blocks=8), "SW_STATUS_INVALID")
        expect_error(
            lambda: eng.offload(5, 0, 5, k[:16].transpose(1, 0, 2), v[:16].transpose(1, 0, 2)),
            "SW_STATUS_INVALID")  # past the end
        # the store refuses to close under an open engine
        e = expect_error(st.close, "SW_STATUS_INVALID")
        assert "SwapEngine" in e.detail and not st.closed
        eng.close()
        eng.close()
        for fn in (lambda: eng.attend(0, 5, _q(rng, 1)), lambda: eng.seq_length(5, 0),
                   eng.get_stats, lambda: eng.seq_add(6, ns=2)):
            assert "closed" in expect_error(fn, "SW_STATUS_INVALID").detail
        # bad configuration: the library names the field
        e = expect_error(
            lambda: spillway.SwapEngine(st, resident_blocks=0, **SHAPE), "SW_STATUS_INVALID")
        assert "resident_blocks" in e.detail
        bad = dict(SHAPE, num_qo_heads=3)
        expect_error(lambda: spillway.SwapEngine(st, **bad), "SW_STATUS_INVALID")
        expect_error(lambda: spillway.SwapEngine(st, pool="gpu", **SHAPE), "SW_STATUS_INVALID")
        expect_error(lambda: spillway.SwapEngine(object(), **SHAPE), "SW_STATUS_INVALID")
    expect_error(lambda: spillway.SwapEngine(st, **SHAPE), "SW_STATUS_INVALID")  # closed store


def test_swap_device_pool_without_gpu(tmp_path):
    if spillway.cuda_device_count() > 0:
        pytest.skip("a GPU is usable here: the device pool is tested by the gpu tests")
    with spillway.Store(tmp_path / "kv", capacity_bytes=4 << 20) as st:
        expect_error(lambda: spillway.SwapEngine(st, pool="device", **SHAPE), "SW_STATUS_NO_DEVICE")


def test_swap_torch_cpu_outputs_are_bf16(tmp_path):
    torch = _torch_or_skip()
    rng = np.random.default_rng(401)
    k, v = _kv(rng, 33)
    with spillway.Store(tmp_path / "kv", capacity_bytes=8 << 20) as st, \
            spillway.SwapEngine(st, resident_blocks=1, **SHAPE) as eng:
        eng.seq_add(1, ns=4)
        eng.offload_tokens(1, 0, torch.from_numpy(k), torch.from_numpy(v))  # fp32 -> bf16
        q = _q(rng, 4)
        out, lse = eng.attend(0, 1, torch.from_numpy(q), return_lse=True)
        assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
        ro, _ = _ref(q, k, v)
        assert rel_l2(out.float().numpy(), ro) <= TOL


def test_swap_integers_past_their_c_type_are_refused(tmp_path):
    """Ids, layers, blocks, counts and shape fields are range-checked against
    the C prototype's type (ctypes would wrap them: layer 2**32 was layer 0,
    block 2**32 overwrote block 0) before any call that changes state."""
    rng = np.random.default_rng(311)
    with spillway.Store(tmp_path / "kv", capacity_bytes=16 << 20) as st:
        e = expect_error(lambda: spillway.SwapEngine(st, **dict(SHAPE, num_kv_heads=2**32 + 2)),
                         "SW_STATUS_INVALID")
        assert "num_kv_heads=4294967298" in e.detail and "2147483647" in e.detail
        expect_error(
            lambda: spillway.SwapEngine(st, projection_seed=-1, **SHAPE), "SW_STATUS_INVALID")
        expect_error(lambda: spillway.SwapEngine(st, resident_blocks=2**32 + 4, **SHAPE),
                     "SW_STATUS_INVALID")
        expect_error(lambda: spillway.SwapEngine(st, device=2**32, **SHAPE), "SW_STATUS_INVALID")
        eng = spillway.SwapEngine(st, resident_blocks=4, **SHAPE)
        e = expect_error(lambda: eng.seq_add(5, ns=2, max_blocks=2**32 + 1), "SW_STATUS_INVALID")
        assert "max_blocks" in e.detail and "4294967295" in e.detail
        expect_error(lambda: eng.seq_add(2**64, ns=2), "SW_STATUS_INVALID")
        expect_error(lambda: eng.seq_add(-1, ns=2), "SW_STATUS_INVALID")
        expect_error(lambda: eng.seq_add(5, ns=2, block_base=-1), "SW_STATUS_INVALID")
        expect_error(lambda: eng.seq_add(5.0, ns=2), "SW_STATUS_INVALID")  # not an integer
        expect_error(lambda: eng.seq_attach(5, ns=2**64), "SW_STATUS_INVALID")
        eng.seq_add(5, ns=2, max_blocks=8)  # nothing was registered above
        k, v = _kv(rng, 20)
        eng.offload_tokens(5, 0, k, v)
        q = _q(rng, 1)
        want = eng.attend(0, 5, q)
        e = expect_error(lambda: eng.offload_tokens(5, 2**32, k, v), "SW_STATUS_INVALID")
        assert "layer=4294967296" in e.detail
        k2, v2 = _kv(rng, 16)
        hnd = (k2.transpose(1, 0, 2), v2.transpose(1, 0, 2))
        e = expect_error(lambda: eng.offload(5, 0, 2**32, *hnd), "SW_STATUS_INVALID")
        assert "block=4294967296" in e.detail
        e = expect_error(lambda: eng.offload_batch([(5, 0, 0) + hnd, (5, 0, 2**32) + hnd]),
                         "SW_STATUS_INVALID")
        assert "item 1" in e.detail  # and item 0 was not written
        expect_error(lambda: eng.offload_tokens(5, 0, k, v, first_block=2**31), "SW_STATUS_INVALID")
        expect_error(
            lambda: eng.offload(5, 0, 1, *hnd, valid_tokens=2**32 + 16), "SW_STATUS_INVALID")
        assert eng.seq_length(5, 0) == (20, 2) and eng.seq_length(5, 1) == (0, 0)
        assert eng.get_stats()["offloads"] == 2
        assert np.array_equal(eng.attend(0, 5, q), want)  # block 0 untouched
        e = expect_error(lambda: eng.attend(2**32, 5, q), "SW_STATUS_INVALID")
        assert "layer=4294967296" in e.detail
        expect_error(lambda: eng.attend(0, 2**64 + 5, q), "SW_STATUS_INVALID")
        expect_error(lambda: eng.attend(0, [5, 2**64], _q(rng, 2)), "SW_STATUS_INVALID")
        expect_error(lambda: eng.seq_length(5, 2**32), "SW_STATUS_INVALID")
        expect_error(lambda: eng.resident_slots(5, -2**31 - 1), "SW_STATUS_INVALID")
        expect_error(lambda: eng.score_blocks(2**64 + 5, 0, q), "SW_STATUS_INVALID")
        expect_error(lambda: eng.seq_remove(2**64 + 5), "SW_STATUS_INVALID")
        assert eng.seq_length(5, 0) == (20, 2)  # still registered
        # numpy integers are integers
        assert np.array_equal(eng.attend(np.int64(0), np.uint64(5), q), want)
        eng.close()


def test_swap_q_indptr_must_fit_int32(tmp_path):
    """int64 q_indptr values past int32 were wrapped (0, 2**32+1 became 0, 1)."""
    rng = np.random.default_rng(313)
    with spillway.Store(tmp_path / "kv", capacity_bytes=16 << 20) as st, \
            spillway.SwapEngine(st, resident_blocks=4, **SHAPE) as eng:
        eng.seq_add(5, ns=2, max_blocks=8)
        k, v = _kv(rng, 20)
        eng.offload_tokens(5, 0, k, v)
        q = _q(rng, 1)
        for ind in (np.array([0, 2**32 + 1], dtype=np.int64),
                    np.array([0, 2**63 + 1], dtype=np.uint64), [0, 2**70], [0, 2**32 + 1]):
            e = expect_error(lambda: eng.attend(0, 5, q, q_indptr=ind), "SW_STATUS_INVALID")
            assert "q_indptr" in e.detail and "2147483647" in e.detail, e.detail
        expect_error(lambda: eng.attend(0, 5, q, q_indptr=[0.0, 1.0]), "SW_STATUS_INVALID")
        expect_error(lambda: eng.attend(0, 5, q, q_indptr=np.array([0, 1.5], dtype=object)),
                     "SW_STATUS_INVALID")
        out = eng.attend(0, 5, q, q_indptr=np.array([0, 1], dtype=np.int64))
        assert np.array_equal(out, eng.attend(0, 5, q))


def test_swap_graph_tensors_must_be_on_the_engine_device():
    """SwapGraph.attend takes q/out/lse only in the engine's device memory
    (is_cuda and the same ordinal): the helper it uses, without a GPU."""
    from types import SimpleNamespace

    from spillway.swap import _on_device

    def t(is_cuda, index):
        return SimpleNamespace(is_cuda=is_cuda,
                               device=SimpleNamespace(type="cuda" if is_cuda else "cpu",
                                                      index=index))

    assert _on_device(t(True, 0), 0) and _on_device(t(True, 1), 1)
    assert not _on_device(t(True, 1), 0) and not _on_device(t(True, 0), 1)
    assert not _on_device(t(False, None), 0)


@pytest.mark.gpu
def test_swap_graph_refuses_tensors_on_another_gpu(tmp_path):
    torch = _torch_or_skip()
    if not torch.cuda.is_available() or spillway.cuda_device_count() < 2 or \
            torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices and a CUDA build of libspillway")
    rng = np.random.default_rng(911)
    k, v = _kv(rng, 20)
    with spillway.Store(tmp_path / "kv", capacity_bytes=32 << 20) as st, \
            spillway.SwapEngine(st, resident_blocks=8, pool="device", device=0, **SHAPE) as eng:
        eng.seq_add(1, ns=1, max_blocks=4)
        eng.offload_tokens(1, 0, torch.from_numpy(k).cuda(0), torch.from_numpy(v).cuda(0))
        g = eng.graph(0, [1], max_blocks=4)
        q0 = torch.from_numpy(_q(rng, 1)).to("cuda:0", torch.bfloat16)
        q1, o0 = q0.to("cuda:1"), torch.empty_like(q0)
        for args in ((q1, o0), (q0, o0.to("cuda:1")),
                     (q0, o0, torch.empty((1, SHAPE["num_qo_heads"]), device="cuda:1"))):
            e = expect_error(lambda: g.attend(*args), "SW_STATUS_INVALID")
            assert "cuda:0" in e.detail


# -------------------------------------------------------------- GPU pool --

@pytest.mark.gpu
@pytest.mark.parametrize("pool", ["host", "device"])
def test_swap_offload_from_cuda_tensors(tmp_path, pool):
    """Blocks read from GPU memory (a padded NHD page pool on the device, one
    batch on a side stream, no sync before it) are the same stripes as the
    same blocks from host memory: the host pool attends to the same bytes;
    the device pool within BF16 rounding of it."""
    torch = _torch_or_skip()
    if not torch.cuda.is_available() or spillway.cuda_device_count() < 1:
        pytest.skip("needs torch with CUDA and a CUDA build of libspillway")
    seed = 521
    rng = np.random.default_rng(seed)
    bs, tokens = SHAPE["block_size"], 75
    pages = (tokens + bs - 1) // bs
    k, v = _kv(rng, tokens)
    q = _q(rng, 2)
    outs = []
    with spillway.Store(tmp_path / "kv", capacity_bytes=32 << 20) as st:
        for way in range(2):
            with spillway.SwapEngine(st, resident_blocks=2, pool=pool if way else "host",
                                     **SHAPE) as eng:
                eng.seq_add(1, ns=30 + way, max_blocks=16)
                kp, _ = _page_pool(k, pages, bs, True)
                vp, _ = _page_pool(v, pages, bs, True)

                def offload(kp, vp):
                    for layer in range(2):
                        eng.offload_batch(
                            [(1, layer, i, kp[i, :min(bs, tokens - i * bs), :, :64],
                              vp[i, :min(bs, tokens - i * bs), :, :64]) for i in range(pages)],
                            layout="NHD")
                if way:
                    stream = torch.cuda.Stream()
                    with torch.cuda.stream(stream):
                        offload(torch.from_numpy(kp.view(np.int16)).cuda().view(torch.bfloat16),
                                torch.from_numpy(vp.view(np.int16)).cuda().view(torch.bfloat16))
                else:
                    offload(kp, vp)
                assert eng.seq_length(1, 1) == (tokens, pages)
                if way and pool == "device":
                    out = eng.attend(1, 1, torch.from_numpy(q).to("cuda", torch.bfloat16))
                    torch.cuda.synchronize()
                    out = out.float().cpu().numpy()
                else:
                    out = np.asarray(eng.attend(1, 1, q))
                outs.append(out)
    ro, _ = _ref(q, k, v)
    assert rel_l2(outs[0], ro) <= TOL, f"seed={seed}"
    if pool == "host":
        assert np.array_equal(outs[0], outs[1])
    else:
        assert rel_l2(outs[1], outs[0]) <= TOL, f"seed={seed}"


@pytest.mark.gpu
def test_swap_device_pool_cuda_tensors(tmp_path):
    torch = _torch_or_skip()
    if not torch.cuda.is_available() or spillway.cuda_device_count() < 1:
        pytest.skip("needs torch with CUDA and a CUDA build of libspillway")
    seed = 501
    rng = np.random.default_rng(seed)
    lens = {1: 200, 2: 75}
    cache = {s: _kv(rng, n) for s, n in lens.items()}
    with spillway.Store(tmp_path / "kv", capacity_bytes=32 << 20) as st, \
            spillway.SwapEngine(st, resident_blocks=4, pool="device", **SHAPE) as eng:
        for s, (k, v) in cache.items():
            eng.seq_add(s, ns=3, block_base=100 * s, max_blocks=64)
            eng.offload_tokens(s, 0, torch.from_numpy(k).cuda(), torch.from_numpy(v).cuda())
        q = _q(rng, 2)
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            tq = torch.from_numpy(q).to("cuda", torch.bfloat16)
            out = eng.attend(0, [1, 2], tq)
        stream.synchronize()
        for i, s in enumerate(lens):
            ro, _ = _ref(q[i:i + 1], *cache[s])
            err = rel_l2(out[i:i + 1].float().cpu().numpy(), ro)
            assert err <= TOL, f"seed={seed} seq={s} rel L2 {err:.3g}"
        expect_error(lambda: eng.attend(0, 1, q[:1]), "SW_STATUS_INVALID")  # host data, device pool


def test_swap_resident_slots_host_pool(tmp_path):
    """resident_slots names the slot of each block an attend read into the
    pool (-1 before); a host pool has no pool view (its slots move)."""
    rng = np.random.default_rng(71)
    k, v = _kv(rng, 40)
    with spillway.Store(tmp_path / "kv", capacity_bytes=16 << 20) as st, \
            spillway.SwapEngine(st, resident_blocks=8, pool="host", **SHAPE) as eng:
        eng.seq_add(1, ns=3, max_blocks=16)
        eng.offload_tokens(1, 0, k, v)
        assert eng.resident_slots(1, 0).tolist() == [-1, -1, -1]
        eng.attend(0, 1, _q(rng, 1))
        slots = eng.resident_slots(1, 0)
        assert (slots >= 0).all() and len(set(slots.tolist())) == 3
        assert eng.resident_slots(1, 1).shape == (0,)
        expect_error(lambda: eng.resident_slots(2, 0), "SW_STATUS_NOT_FOUND")
        expect_error(lambda: eng.pool_view(), "SW_STATUS_UNSUPPORTED")
        expect_error(lambda: eng.graph(0, [1], max_blocks=8), "SW_STATUS_UNSUPPORTED")


@pytest.mark.gpu
def test_swap_graph_capture(tmp_path):
    """A decode step captured in a torch CUDA graph (SwapEngine.graph): each
    replay after its prepare() equals SwapEngine.attend bit for bit over
    three one-token appends of two sequences; a sequence with a block
    offloaded from host memory (not written through) is refused by
    prepare() until attend reads it into the pool."""
    torch = _torch_or_skip()
    if not torch.cuda.is_available() or spillway.cuda_device_count() < 1:
        pytest.skip("needs torch with CUDA and a CUDA build of libspillway")
    rng = np.random.default_rng(907)
    bs = SHAPE["block_size"]
    k, v = _kv(rng, 80)
    kd = torch.from_numpy(k).to("cuda", torch.bfloat16)
    vd = torch.from_numpy(v).to("cuda", torch.bfloat16)
    lens = [40, 61]
    with spillway.Store(tmp_path / "kv", capacity_bytes=32 << 20) as st, \
            spillway.SwapEngine(st, resident_blocks=64, pool="device", **SHAPE) as eng:
        for i, n in zip((1, 2), lens):
            eng.seq_add(i, ns=10 + i, max_blocks=16)
            eng.offload_tokens(i, 0, kd[:n], vd[:n])
        g = eng.graph(0, [1, 2], max_blocks=16)
        q = torch.from_numpy(_q(rng, 2)).to("cuda", torch.bfloat16)
        out = torch.empty_like(q)
        g.prepare()
        g.attend(q, out)
        cg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cg):
            g.attend(q, out)
        for step in range(3):
            for i in (0, 1):
                n = lens[i]
                first = n // bs
                eng.offload_tokens(i + 1, 0, kd[first * bs:n + 1], vd[first * bs:n + 1],
                                   first_block=first)
                lens[i] = n + 1
            q.copy_(torch.from_numpy(_q(rng, 2)).to("cuda", torch.bfloat16))
            g.prepare()
            cg.replay()
            want = eng.attend(0, [1, 2], q)
            torch.cuda.synchronize()
            assert torch.equal(out, want), f"step {step}"
            for i in (0, 1):
                ro, _ = _ref(q[i:i + 1].float().cpu().numpy(), k[:lens[i]], v[:lens[i]])
                assert rel_l2(out[i:i + 1].float().cpu().numpy(), ro) <= TOL
        # a block from host memory is not written through: prepare refuses
        eng.seq_add(3, ns=20, max_blocks=4)
        eng.offload_tokens(3, 0, k[:20], v[:20])
        g3 = eng.graph(0, [3], max_blocks=4)
        e = expect_error(lambda: g3.prepare(), "SW_STATUS_NOT_FOUND")
        assert "not resident" in e.detail
        eng.attend(0, 3, q[:1])      # the tile loop reads the blocks into the pool
        g3.prepare()
        o3 = torch.empty_like(q[:1])
        g3.attend(q[:1].contiguous(), o3)
        assert torch.equal(o3, eng.attend(0, 3, q[:1].contiguous()))
        expect_error(lambda: g3.attend(q, o3), "SW_STATUS_INVALID")  # wrong rows
    assert g._handle is None and g3._handle is None   # closed with the engine


@pytest.mark.gpu
def test_swap_device_pool_resident_path(tmp_path):
    """Blocks offloaded from CUDA tensors are written through into the device
    pool; decode calls whose blocks are all resident take the resident path
    (one decode kernel over the pool: stats' resident_attends) through
    attend's short entry, also after the last block is rewritten by a
    one-token append; results equal the reference, as does a five-row chunk
    that the tile loop takes."""
    torch = _torch_or_skip()
    if not torch.cuda.is_available() or spillway.cuda_device_count() < 1:
        pytest.skip("needs torch with CUDA and a CUDA build of libspillway")
    seed = 733
    rng = np.random.default_rng(seed)
    tokens = 90
    k, v = _kv(rng, tokens + 1)
    kd, vd = torch.from_numpy(k).cuda(), torch.from_numpy(v).cuda()
    with spillway.Store(tmp_path / "kv", capacity_bytes=32 << 20) as st, \
            spillway.SwapEngine(st, resident_blocks=64, pool="device", **SHAPE) as eng:
        eng.seq_add(1, ns=7, max_blocks=64)
        for layer in range(2):
            eng.offload_tokens(1, layer, kd[:tokens], vd[:tokens])
        assert eng.get_stats()["offload_resident"] == 2 * 6
        q = _q(rng, 5)
        tq = torch.from_numpy(q).to("cuda", torch.bfloat16)
        before = eng.get_stats()["resident_attends"]
        out, lse = eng.attend(0, 1, tq[:1], return_lse=True)
        assert eng.get_stats()["resident_attends"] == before + 1
        assert eng.last_attend["misses"] == 0 and eng.last_attend["tiles"] == 0
        ro, rl = _ref(q[:1], k[:tokens], v[:tokens])
        assert rel_l2(out.float().cpu().numpy(), ro) <= TOL, f"seed={seed}"
        assert np.max(np.abs(lse.cpu().numpy() - rl)) <= 1e-2, f"seed={seed}"
        # five rows of GQA 4 are 20 rows a kv head, more than one decode
        # item takes: the tile loop (q_indptr given: the general entry)
        before = eng.get_stats()["resident_attends"]
        out5 = eng.attend(0, 1, tq, np.array([0, 5], dtype=np.int32))
        assert eng.get_stats()["resident_attends"] == before
        ro5, _ = _ref(q, k[:tokens], v[:tokens])
        assert rel_l2(out5.float().cpu().numpy(), ro5) <= TOL, f"seed={seed}"
        # one more token: the last block rewritten, still resident
        first = tokens // SHAPE["block_size"]
        bs = SHAPE["block_size"]
        for layer in range(2):
            eng.offload_tokens(1, layer, kd[first * bs:tokens + 1], vd[first * bs:tokens + 1],
                               first_block=first)
        before = eng.get_stats()["resident_attends"]
        out = eng.attend(1, 1, tq[:1])
        assert eng.get_stats()["resident_attends"] == before + 1
        ro, _ = _ref(q[:1], k, v)
        assert rel_l2(out.float().cpu().numpy(), ro) <= TOL, f"seed={seed}"
        # the short entry keeps its struct between calls: a change of
        # sequence, row count, causal and LSE from one call to the next is
        # each seen (two rows of one sequence, not causal, with LSE; then a
        # second sequence; then the first again, causal, no LSE)
        eng.seq_add(2, ns=8, max_blocks=64)
        eng.offload_tokens(2, 1, kd[:40], vd[:40])
        out, lse = eng.attend(1, 1, tq[:2], causal=False, return_lse=True)
        ro, rl = _ref(q[:2], k, v, causal=False)
        assert rel_l2(out.float().cpu().numpy(), ro) <= TOL, f"seed={seed}"
        assert np.max(np.abs(lse.cpu().numpy() - rl)) <= 1e-2, f"seed={seed}"
        out = eng.attend(1, 2, tq[2:3])
        ro, _ = _ref(q[2:3], k[:40], v[:40])
        assert rel_l2(out.float().cpu().numpy(), ro) <= TOL, f"seed={seed}"
        out = eng.attend(1, 1, tq[3:4])
        ro, _ = _ref(q[3:4], k, v)
        assert rel_l2(out.float().cpu().numpy(), ro) <= TOL, f"seed={seed}"
        assert eng.get_stats()["resident_attends"] == before + 4
        # the pool as paged K/V: each block of sequence 1's layer 0 in the
        # slot resident_slots names, bit for bit
        kp, vp = eng.pool_view()
        bs = SHAPE["block_size"]
        assert kp.shape == (64, SHAPE["num_kv_heads"], bs, SHAPE["head_dim"])
        slots = eng.resident_slots(1, 0)
        assert slots.shape[0] == -(-(tokens + 1) // bs) and (slots >= 0).all()
        for b, sl in enumerate(slots.tolist()):
            n = min(bs, tokens + 1 - b * bs)
            want_k = kd[b * bs:b * bs + n].to(torch.bfloat16)
            want_v = vd[b * bs:b * bs + n].to(torch.bfloat16)
            assert torch.equal(kp[sl, :, :n].transpose(0, 1), want_k)
            assert torch.equal(vp[sl, :, :n].transpose(0, 1), want_v)


def _tiny_store(tmp_path, name, extents, **kw):
    # one run of `extents` 4 KiB extents (a block of one kv head, d64, 4
    # tokens: K and V, one extent each)
    return spillway.Store(str(tmp_path / name), capacity_bytes=4096 + extents * 4096,
                          stripe_bytes=4096, run_blocks=extents, **kw)


def test_failed_batch_cuts_each_layer_before_its_first_failed_item(tmp_path):
    # a full store refuses a batch that appends block 4, then overwrites
    # block 1: both items absent, the layer cut before block 1 (an older
    # item's cut once put back the blocks a newer one had cut: length 4
    # with empty blocks, every later call refused)
    rng = np.random.default_rng(1)
    blk = lambda: rng.standard_normal((4, 1, 64)).astype(np.float32)
    with _tiny_store(tmp_path, "cut", 8, full_policy="refuse") as st, \
            spillway.SwapEngine(st, num_layers=1, num_kv_heads=1, num_qo_heads=1, head_dim=64,
                                block_size=4, resident_blocks=8) as eng:
        eng.seq_add(1, ns=1, max_blocks=16)
        kv = [(blk(), blk()) for _ in range(4)]
        eng.offload_batch([(1, 0, b, k, v) for b, (k, v) in enumerate(kv)], layout="NHD")
        expect_error(lambda: eng.offload_batch([(1, 0, 4, blk(), blk()), (1, 0, 1, blk(), blk())],
                                               layout="NHD"), "SW_STATUS_FULL")
        assert eng.seq_length(1, 0) == (4, 1)
        q = _bf16(rng.standard_normal((1, 1, 64)).astype(np.float32))
        out = eng.attend(0, 1, q)
        ref, _ = _ref(q, _bf16(kv[0][0]), _bf16(kv[0][1]))
        assert rel_l2(out, ref) <= 1e-2


def test_batch_gives_a_block_as_fp8_then_bf16(tmp_path):
    # the BF16 item used the block's projected-key buffer, which the FP8
    # item before it frees (use after free: heap corruption, a crash); the
    # block ends as the last item wrote it, scored as BF16
    rng = np.random.default_rng(2)
    with spillway.Store(str(tmp_path / "fp8"), capacity_bytes=64 << 20) as st, \
            spillway.SwapEngine(st, num_layers=1, num_kv_heads=2, num_qo_heads=2, head_dim=64,
                                block_size=4, predictor_rank=128) as eng:
        eng.seq_add(1, ns=1, max_blocks=4)
        k = rng.standard_normal((4, 2, 64)).astype(np.float32)
        eng.offload(1, 0, 0, k, k, layout="NHD")
        for _ in range(50):
            codes = rng.integers(0, 0x70, size=(4, 2, 64)).astype(np.uint8)
            eng.offload_batch([(1, 0, 0, codes, codes, 0.1, 0.1), (1, 0, 0, k, k)],
                              layout="NHD")
            junk = [np.ones(4096) for _ in range(20)]  # (reuses freed memory)
            del junk
        q = _bf16(rng.standard_normal((1, 2, 64)).astype(np.float32))
        assert np.isfinite(eng.score_blocks(1, 0, q)).all()
        out = eng.attend(0, 1, q)
        ref, _ = _ref(q, _bf16(k), _bf16(k))
        assert rel_l2(out, ref) <= 1e-2


def test_remove_deletes_a_cut_blocks_stripes(tmp_path):
    # an overwrite refused by a full store cuts the block; removing the
    # sequence with its stripes deletes that block's stripes and manifest
    # too (they were left: capacity lost, an attach over the range refused)
    rng = np.random.default_rng(3)
    blk = lambda n=4: rng.standard_normal((n, 1, 64)).astype(np.float32)
    with _tiny_store(tmp_path, "rm", 6, full_policy="refuse") as st, \
            spillway.SwapEngine(st, num_layers=1, num_kv_heads=1, num_qo_heads=1, head_dim=64,
                                block_size=4, persist_manifests=True) as eng:
        eng.seq_add(1, ns=1, max_blocks=8)
        eng.offload(1, 0, 0, blk(), blk(), layout="NHD")
        eng.offload(1, 0, 1, blk(2), blk(2), layout="NHD")
        assert st.get_stats()["extents_used"] == 6
        expect_error(lambda: eng.offload(1, 0, 1, blk(3), blk(3), layout="NHD"), "SW_STATUS_FULL")
        assert eng.seq_length(1, 0) == (4, 1)
        eng.seq_remove(1, delete_stripes=True)
        assert st.get_stats()["extents_used"] == 0
        eng.seq_attach(2, ns=1, max_blocks=8)
        assert eng.seq_length(2, 0) == (0, 0)


@pytest.mark.parametrize("where", ["k", "v", "newest", "q"])
def test_swap_nan_in_the_cache_makes_its_rows_nan(tmp_path, where):
    # a decode row that sees a NaN in a key gets NaN output and a NaN LSE
    # (as PyTorch and the fp64 reference), not the zeros and -inf of a row
    # that sees no key -- also a NaN in the newest key, alone in its block,
    # and a NaN query row (every score NaN; the other head stays finite); a
    # NaN in a value makes that column NaN
    rng = np.random.default_rng(9)
    n = 65 if where == "newest" else 64
    with spillway.Store(str(tmp_path / "nan"), capacity_bytes=1 << 26) as st, \
            spillway.SwapEngine(st, num_layers=1, num_kv_heads=1, num_qo_heads=2, head_dim=64,
                                block_size=16, resident_blocks=8) as eng:
        eng.seq_add(7, ns=1, max_blocks=64)
        k = rng.standard_normal((n, 1, 64)).astype(np.float32)
        v = rng.standard_normal((n, 1, 64)).astype(np.float32)
        q = rng.standard_normal((1, 2, 64)).astype(np.float32)
        if where == "q":
            q[0, 1, 5] = np.nan
        else:
            (v if where == "v" else k)[n - 1 if where == "newest" else 10, 0, 3] = np.nan
        eng.offload_tokens(7, 0, k, v)
        out, lse = eng.attend(0, 7, q, return_lse=True)
        if where == "q":
            assert np.isnan(out[0, 1]).all() and np.isnan(lse[..., 1]).all()
            assert np.isfinite(out[0, 0]).all() and np.isfinite(lse[..., 0]).all()
        elif where != "v":
            assert np.isnan(out).all() and np.isnan(lse).all()
        else:
            assert np.isnan(out[..., 3]).all() and np.isfinite(np.delete(out, 3, -1)).all()
            assert np.isfinite(lse).all()

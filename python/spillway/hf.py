"""transformers integration (optional extra): a KV cache kept in the swap
engine and an attention function registered with transformers.

    import spillway, spillway.hf              # registers attn_implementation "spillway"
    model = AutoModelForCausalLM.from_pretrained(..., attn_implementation="spillway")
    with spillway.Store("/var/tmp/kv", capacity_bytes=8 << 30) as st, \\
         spillway.hf.SpillwayCache(model.config, st, resident_blocks=4096) as cache:
        out = model.generate(**inputs, cache=cache, max_new_tokens=64)
        # (past_key_values=cache in transformers 4)

Importing this module imports torch and transformers (>= 4.56: layered
caches, AttentionInterface and AttentionMaskInterface) and registers the name
"spillway" (ATTN_IMPLEMENTATION) for the attention function and for its mask
function; `import spillway` alone imports neither.

The attention function computes in BF16 (q, K, V rounded to BF16, fp32
softmax and accumulation, BF16 output) whatever the model's dtype, and gives
its output back in the query's dtype:
  - with a SpillwayCache: the first forward pass of a sequence (the prompt,
    or its first chunk) runs the ragged prefill (varlen_attention) over the
    chunk, whose K/V the cache has just offloaded to the swap engine; every
    later pass (decode steps, later prefill chunks) runs the swap engine's
    attend over every cached token (bottom-right causal), so the KV cache
    lives in the store and the engine's pool, not in torch tensors.
  - with any other cache (transformers' DynamicCache) or none: the ragged
    prefill over the K/V it is given (bottom-right causal when the query is
    shorter than the keys).
Not supported, refused with SpillwayError (SW_STATUS_UNSUPPORTED) rather than
ignored: padding and custom attention masks (the mask function returns None
for a plain causal mask and refuses any other, before the first layer runs),
dropout, sliding windows, logit softcapping, attention sinks, and, on a
SpillwayCache, beam search reordering, cropping and batch reshaping.

Sequences: batch row b of a SpillwayCache is engine sequence
first_seq_id + b, stored under namespace `ns` as store blocks
b * max_blocks ... (b + 1) * max_blocks - 1. close() removes the sequences
and deletes their stripes from the store unless keep_stripes.
"""

import math
import threading

import torch
import transformers
from transformers import cache_utils

from . import _lib
from .attention import varlen_attention
from .store import Store
from .swap import SwapEngine

try:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, causal_mask_function
except ImportError as e:  # pragma: no cover - depends on the installed transformers
    raise ImportError(f"spillway.hf needs transformers >= 4.56 (AttentionInterface, "
                      f"AttentionMaskInterface); found {transformers.__version__}: {e}") from e
if not hasattr(cache_utils, "CacheLayerMixin"):  # pragma: no cover
    raise ImportError("spillway.hf needs transformers >= 4.56 (layered caches); found "
                      f"{transformers.__version__}")

ATTN_IMPLEMENTATION = "spillway"

__all__ = ["ATTN_IMPLEMENTATION", "SpillwayCache", "spillway_attention", "spillway_mask",
           "register"]


def _unsupported(detail):
    _lib.fail(_lib.SW_STATUS_UNSUPPORTED, detail)


def _invalid(detail):
    _lib.fail(_lib.SW_STATUS_INVALID, detail)


# ------------------------------------------------------------------ mask --

def spillway_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0,
                  mask_function=causal_mask_function, attention_mask=None, local_size=None,
                  **kwargs):
    """Mask function registered for "spillway": None for a plain causal mask
    (the attention applies it itself, bottom-right aligned); any other mask
    (padding, a custom mask function, a local window) is refused here, in
    the model's forward before its first layer, so that no layer has
    written its K/V into a cache for a pass that cannot run. Reading a
    padding mask on a GPU synchronises with its stream."""
    plain = (mask_function is causal_mask_function and local_size is None and
             (attention_mask is None or bool(attention_mask.all())))
    if plain:
        return None
    _unsupported("spillway attention: padding or a custom attention mask is not supported "
                 "(plain causal attention over unpadded sequences of equal length only)")


# ------------------------------------------------------------- attention --

def _packed(x):
    """[B, H, n, d] -> [B * n, H, d] BF16, contiguous."""
    b, h, n, d = x.shape
    return x.detach().transpose(1, 2).reshape(b * n, h, d).to(torch.bfloat16).contiguous()


def _indptr(batch, n):
    return torch.arange(0, (batch + 1) * n, n, dtype=torch.int32)


def spillway_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                       is_causal=None, **kwargs):
    """Attention function of transformers' AttentionInterface ("spillway").

    query: [B, Hq, q_len, d]; key, value: [B, Hkv, kv_len, d] (with a
    SpillwayCache: the chunk its update() returned). Returns
    (out [B, q_len, Hq, d] in query's dtype, None).
    """
    if dropout:
        _unsupported(f"spillway attention: dropout={dropout} (inference only)")
    for name in ("softcap", "sliding_window", "s_aux"):
        if kwargs.get(name) is not None:
            _unsupported(f"spillway attention: {name}={kwargs[name]!r} is not supported")
    if attention_mask is not None:
        _unsupported("spillway attention: padding or a custom attention mask is not supported "
                     "(plain causal attention over unpadded sequences of equal length only)")
    if kwargs.get("output_attentions"):
        _unsupported("spillway attention: output_attentions (no attention probabilities)")
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    bsz, hq, q_len, d = (int(s) for s in query.shape)
    scale = float(scaling) if scaling is not None else 1.0 / math.sqrt(d)
    q = _packed(query)
    chunk = getattr(key, "_spillway_chunk", None)
    if chunk is not None:
        cache, layer, past = chunk
        if past > 0:
            out = cache._attend(layer, q, q_len, causal, scale)
            return out.view(bsz, q_len, hq, d).to(query.dtype), None
    kv_len = int(key.shape[2])
    dev = query.device
    if key.device != dev:
        _invalid(f"spillway attention: query on {dev} but key on {key.device}")
    out = varlen_attention(q, _packed(key), _packed(value), _indptr(bsz, q_len),
                           _indptr(bsz, kv_len), causal=causal, softmax_scale=scale)
    return out.view(bsz, q_len, hq, d).to(query.dtype), None


_register_lock = threading.Lock()


def register(name=ATTN_IMPLEMENTATION):
    """Registers spillway_attention and spillway_mask under `name` with
    transformers (done for "spillway" on import; idempotent)."""
    with _register_lock:
        AttentionInterface.register(name, spillway_attention)
        AttentionMaskInterface.register(name, spillway_mask)


register()


# ----------------------------------------------------------------- cache --

def _text_config(config):
    get = getattr(config, "get_text_config", None)
    return get(decoder=True) if get is not None else config


class SpillwayLayer(cache_utils.CacheLayerMixin):
    """One layer of a SpillwayCache: its length and the tail (the tokens of
    the last, partial block, BF16 on the host, [B, Hkv, r, d]) that the next
    update rewrites together with the new tokens. The K/V themselves live in
    the swap engine."""

    is_sliding = False
    is_compileable = False
    is_croppable = False

    def __init__(self, cache, layer_idx):
        super().__init__()
        self._cache = cache
        self.layer_idx = layer_idx
        self.length = 0
        self._tail_k = self._tail_v = None
        # decode tokens kept in the tail only (the last `pending` of it), not
        # yet in the engine: attended here and merged with the engine's part
        self.pending = 0

    def __repr__(self):
        return f"SpillwayLayer(layer={self.layer_idx}, tokens={self.length})"

    def lazy_initialization(self, key_states, value_states):
        self.device, self.dtype = key_states.device, key_states.dtype
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        """Offloads the new tokens' K/V ([B, Hkv, n, d]) to the engine and
        returns them, marked for spillway_attention."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        past = self.length
        self._cache._offload(self, key_states, value_states)
        key_states._spillway_chunk = (self._cache, self.layer_idx, past)
        return key_states, value_states

    def get_mask_sizes(self, query_length):
        return self.length + query_length, 0

    def get_seq_length(self):
        return self.length

    def get_max_length(self):
        return -1

    def offload(self):
        pass  # the K/V already live in the store and the engine's pool

    def prefetch(self):
        pass

    def reset(self):
        self._cache.reset()

    def crop(self, tokens_to_remove):
        if tokens_to_remove:
            _unsupported("SpillwayCache cannot be cropped (assisted decoding)")

    def reorder_cache(self, beam_idx):
        _unsupported("SpillwayCache does not support beam search (reorder_cache)")

    def batch_repeat_interleave(self, repeats):
        if self.length and repeats != 1:
            _unsupported("SpillwayCache cannot repeat its batch (num_return_sequences > 1 "
                         "after prefill)")

    def batch_select_indices(self, indices):
        if self.length:
            _unsupported("SpillwayCache cannot select batch rows")


class SpillwayCache(cache_utils.Cache):
    """A transformers Cache whose K/V live in the swap engine over a Store.

    Args:
        config: the model's config (model.config). Its attention
            implementation must be "spillway" (from_pretrained(...,
            attn_implementation="spillway") or
            model.set_attn_implementation("spillway")): another attention
            would see only the new tokens' K/V. Every layer must be full
            attention (no sliding windows).
        store: an open spillway.Store (the caller keeps it open while the
            cache is in use and closes it after).
        block_size: tokens per engine block (default 16).
        resident_blocks: slots of the engine's pool, shared by all layers
            and sequences (None = the library's default, 64).
        pool: "host" (slots in host memory, CPU attention) or "device" (slots
            in GPU memory, CUDA attention on torch's current stream; the
            model on that GPU).
        device: CUDA ordinal of a device pool.
        ns: the store namespace of the sequences' blocks.
        first_seq_id: engine sequence id of batch row 0.
        max_blocks: blocks per sequence (the context limit is max_blocks *
            block_size tokens); row b uses store blocks from b * max_blocks.
        keep_stripes: close() keeps the stripes in the store (else deletes
            them), after flush().

    Decode tokens that do not fill their block stay in the cache (each
    layer's tail) and are attended there, merged with the engine's part by
    log-sum-exp: a block is written to the store once, when it fills, not
    once a token. flush() writes them (every token in the store).
        tile_blocks, predictor_rank, prefetch_depth, policy: SwapEngine's.
    """

    def __init__(self, config, store, *, block_size=16, resident_blocks=None, pool="host",
                 device=0, ns=1, first_seq_id=0, max_blocks=1 << 20, keep_stripes=False,
                 tile_blocks=None, predictor_rank=None, prefetch_depth=None, policy="score"):
        cfg = _text_config(config)
        impl = getattr(cfg, "_attn_implementation", None) or \
            getattr(config, "_attn_implementation", None)
        if impl != ATTN_IMPLEMENTATION:
            _invalid(f"SpillwayCache needs the model's attention implementation to be "
                     f"{ATTN_IMPLEMENTATION!r}, not {impl!r}: load it with "
                     f"attn_implementation={ATTN_IMPLEMENTATION!r} or call "
                     f"model.set_attn_implementation({ATTN_IMPLEMENTATION!r})")
        if not isinstance(store, Store):
            _invalid(f"store must be a spillway.Store, got {type(store).__name__}")
        layer_types = getattr(cfg, "layer_types", None)
        if layer_types is not None and any(t != "full_attention" for t in layer_types):
            _unsupported(f"SpillwayCache: every layer must be full attention; layer types "
                         f"{sorted(set(layer_types))}")
        if getattr(cfg, "sliding_window", None) is not None and \
                getattr(cfg, "use_sliding_window", True):
            _unsupported(f"SpillwayCache: sliding_window={cfg.sliding_window} is not supported")
        num_layers = int(cfg.num_hidden_layers)
        hq = int(cfg.num_attention_heads)
        hkv = int(getattr(cfg, "num_key_value_heads", None) or hq)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // hq)
        if max_blocks < 1 or first_seq_id < 0:
            _invalid(f"max_blocks={max_blocks} must be >= 1 and first_seq_id={first_seq_id} "
                     ">= 0")
        self.engine = SwapEngine(store, num_layers=num_layers, num_kv_heads=hkv,
                                 num_qo_heads=hq, head_dim=head_dim, block_size=block_size,
                                 resident_blocks=resident_blocks, tile_blocks=tile_blocks,
                                 predictor_rank=predictor_rank, prefetch_depth=prefetch_depth,
                                 policy=policy, pool=pool, device=device)
        layers = [SpillwayLayer(self, i) for i in range(num_layers)]
        super().__init__(layers=layers)
        self.store = store
        self.ns, self.first_seq_id, self.max_blocks = int(ns), int(first_seq_id), int(max_blocks)
        self.keep_stripes = bool(keep_stripes)
        self.block_size = int(block_size)
        self.batch = 0  # sequences registered with the engine (0 until the first update)

    # ------------------------------------------------------- lifecycle --
    def seq_ids(self):
        """Engine sequence ids of the batch rows."""
        return [self.first_seq_id + b for b in range(self.batch)]

    def reset(self):
        """Forgets every sequence (deleting its stripes unless keep_stripes);
        the next update starts a new batch."""
        eng = self.engine
        if eng is not None and not eng.closed:
            for sid in self.seq_ids():
                eng.seq_remove(sid, delete_stripes=not self.keep_stripes)
        self.batch = 0
        for layer in self.layers:
            layer.length = 0
            layer.pending = 0
            layer._tail_k = layer._tail_v = None
            layer.is_initialized = False

    def flush(self):
        """Offloads every layer's decode tokens that only the cache holds
        (the partial block's, kept until the block fills) so that the store
        has every token. close() does it when keep_stripes."""
        for layer in self.layers:
            if layer.pending and self.engine is not None and not self.engine.closed:
                self._write_tail(layer)

    def close(self):
        """Removes the sequences (see reset) and closes the engine.
        Idempotent."""
        eng = self.engine
        if eng is None or eng.closed:
            return
        try:
            if not self.store.closed:
                if self.keep_stripes:
                    self.flush()
                self.reset()
        finally:
            eng.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return (f"SpillwayCache(layers={len(self.layers)}, batch={self.batch}, "
                f"tokens={self.get_seq_length()}, engine={self.engine!r})")

    # ---------------------------------------------------- engine calls --
    def _register(self, batch):
        if self.batch == 0:
            for b in range(batch):
                self.engine.seq_add(self.first_seq_id + b, self.ns, block_base=b * self.max_blocks,
                                    max_blocks=self.max_blocks)
            self.batch = batch
        elif batch != self.batch:
            _invalid(f"SpillwayCache holds {self.batch} sequences but a forward pass has batch "
                     f"{batch} (reset() starts a new batch)")

    def _offload(self, layer, key_states, value_states):
        """Appends [B, Hkv, n, d] K/V to the layer's sequences: the last
        partial block is rewritten with the new tokens, full blocks follow.
        A decode token (n = 1 after a prefill) that does not fill its block
        is kept in the tail only (layer.pending): the block is written once,
        when it fills, instead of once a token."""
        if key_states.dim() != 4 or key_states.shape != value_states.shape:
            _invalid(f"SpillwayCache.update: key {tuple(key_states.shape)} and value "
                     f"{tuple(value_states.shape)} must both be [batch, kv_heads, tokens, "
                     "head_dim]")
        bsz, n = int(key_states.shape[0]), int(key_states.shape[2])
        self._register(bsz)
        if n == 0:
            return
        bs = self.block_size
        # kept where the model made them: the engine packs device blocks on
        # the current stream (one kernel and one copy for the step)
        k = key_states.detach().to(dtype=torch.bfloat16)
        v = value_states.detach().to(dtype=torch.bfloat16)
        if layer._tail_k is not None:
            k = torch.cat([layer._tail_k, k], dim=2)
            v = torch.cat([layer._tail_v, v], dim=2)
        total = k.shape[2]
        if n == 1 and layer.length - layer.pending > 0 and total < bs:
            layer._tail_k, layer._tail_v = k, v
            layer.pending += 1
            layer.length += 1
            return
        self._write_tail(layer, k, v, layer.length + n)

    def _write_tail(self, layer, k=None, v=None, length=None):
        """Offloads the tail k, v (default: the layer's own; the partial
        block's tokens, the pending ones included, and any full blocks after
        it) of a layer that then holds `length` tokens (default: as now),
        and keeps what is left of a partial block as the new tail. The
        layer's state changes only once the offload has succeeded."""
        bs = self.block_size
        if k is None:
            k, v = layer._tail_k, layer._tail_v
        if length is None:
            length = layer.length
        total = k.shape[2]
        first = (length - total) // bs
        nblocks = (total + bs - 1) // bs
        self.engine.offload_batch(
            [(self.first_seq_id + b, layer.layer_idx, first + i, k[b, :, i * bs:(i + 1) * bs],
              v[b, :, i * bs:(i + 1) * bs]) for b in range(self.batch) for i in range(nblocks)])
        rest = total % bs
        if rest:
            layer._tail_k = k[:, :, total - rest:].clone()
            layer._tail_v = v[:, :, total - rest:].clone()
        else:
            layer._tail_k = layer._tail_v = None
        layer.pending = 0
        layer.length = length

    def _attend(self, layer, q, q_len, causal, scale):
        """Engine attention of layer `layer` for packed BF16 queries
        [B * q_len, Hq, d] (q_len rows per sequence, the last positions)."""
        ids = self.seq_ids()
        # (none for one sequence or one row each: the engine's short path)
        indptr = None if len(ids) == 1 or q_len == 1 else \
            [i * q_len for i in range(len(ids) + 1)]
        dev = q.device
        lay = self.layers[layer]
        p = lay.pending
        qe = q.to("cpu") if self.engine.pool == "host" and dev.type != "cpu" else q
        if not p:
            out = self.engine.attend(layer, ids, qe, indptr, causal=causal, softmax_scale=scale)
            return out.to(dev)
        # decode (q_len 1) with p tokens only in the tail: the engine's part
        # and the tail's, merged by their log-sum-exps (fp32)
        o1, l1 = self.engine.attend(layer, ids, qe, indptr, causal=causal, softmax_scale=scale,
                                    return_lse=True)
        kt = lay._tail_k[:, :, -p:].to(dev, torch.float32)  # [B, Hkv, p, d]
        vt = lay._tail_v[:, :, -p:].to(dev, torch.float32)
        bsz, hkv = kt.shape[0], kt.shape[1]
        hq, d = q.shape[1], q.shape[2]
        qf = q.to(torch.float32).view(bsz, hkv, hq // hkv, d)
        s = torch.einsum("bhgd,bhpd->bhgp", qf, kt) * scale
        l2 = torch.logsumexp(s, dim=-1)  # [B, Hkv, G]
        o2 = torch.einsum("bhgp,bhpd->bhgd", torch.softmax(s, dim=-1), vt)
        l1 = l1.to(dev, torch.float32).view(bsz, hkv, hq // hkv)
        o1 = o1.to(dev, torch.float32).view(bsz, hkv, hq // hkv, d)
        m = torch.maximum(l1, l2)
        w1, w2 = torch.exp(l1 - m), torch.exp(l2 - m)
        out = (o1 * w1[..., None] + o2 * w2[..., None]) / (w1 + w2)[..., None]
        return out.reshape(bsz, hq, d).to(torch.bfloat16)

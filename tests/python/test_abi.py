"""The binding's ctypes mirrors (python/spillway/_lib.py) against the C
headers: a C program compiled here prints sizeof and every field's offset of
each mirrored struct, and they must equal ctypes' layout. A header that
appends a field (or reorders one) without the mirror following fails here,
before a call hands the library a struct of the wrong size. Skipped without
a C compiler."""

import ctypes
import os
import shutil
import subprocess

import pytest

from spillway import _lib

_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

MIRRORS = ["sw_prefill_params", "sw_prefill_tensors", "sw_paged_kv", "sw_store_config",
           "sw_store_key",
           "sw_store_stats", "sw_store_verify_result", "sw_swap_model", "sw_swap_config",
           "sw_swap_block", "sw_swap_attend_params", "sw_swap_attend_result", "sw_swap_stats"]


def test_mirrors_match_the_headers(tmp_path):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    lines = ["#include <spillway.h>", "#include <stddef.h>", "#include <stdio.h>",
             "int main(void) {"]
    want = []
    for name in MIRRORS:
        cls = getattr(_lib, name)
        lines.append(f'    printf("{name} %zu\\n", sizeof({name}));')
        want.append(f"{name} {ctypes.sizeof(cls)}")
        for field, _ in cls._fields_:
            lines.append(f'    printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
            want.append(f"{name}.{field} {getattr(cls, field).offset}")
    lines += ["    return 0;", "}"]
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "abi"
    r = subprocess.run([cc, "-std=c11", "-I", os.path.join(_ROOT, "include"), "-o", str(exe),
                        str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr  # a field the header does not have fails here
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    got = [x for x in got if x]
    diff = [f"C: {g}  ctypes: {w}" for g, w in zip(got, want) if g != w]
    assert not diff, "\n".join(diff)
    assert len(got) == len(want)

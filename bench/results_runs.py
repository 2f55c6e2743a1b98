"""The runs of bench results files, for the tools that table them
(bench/swap_table.py, bench/paged_table.py).

A results file is one run (what a bench's `--json` writes: "component",
"command", "commit", "utc", "records") or a record of several (an object with
"runs", as bench/results/ keeps them)."""

import argparse
import json
import os
import sys


class RunsError(Exception):
    """A results file that cannot be read, or holds no run of the component."""


def load_runs(paths, component):
    """The runs in `paths`, in order; RunsError naming the file where one is unreadable,
    or holds a run without records or of another component."""
    runs = []
    for path in paths:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise RunsError("%s: %s" % (path, e)) from None
        found = doc["runs"] if isinstance(doc, dict) and isinstance(doc.get("runs"), list) \
            else [doc]
        for run in found:
            if not isinstance(run, dict) or run.get("component") != component \
                    or not run.get("records"):
                raise RunsError("%s holds no %s records" % (path, component))
        runs += found
    return runs


def heading(runs):
    """A line per run (its command, commit and time), then a blank line."""
    return "".join("%s`%s`, commit %s, %s\n" % ("run %d: " % (i + 1) if len(runs) > 1 else "",
                                                r.get("command", "?"), r.get("commit", "?")[:7],
                                                r.get("utc", "?"))
                   for i, r in enumerate(runs)) + "\n"


def tool_args(doc, component, what):
    """The command line of a table tool whose docstring is `doc`: RESULTS... [--md OUT],
    then the runs of `component` in them. Returns (args, runs), or (args, None) after
    printing why the files cannot be tabled."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--md", help="write the %s here too" % what)
    a = ap.parse_args()
    try:
        return a, load_runs(a.results, component)
    except RunsError as e:
        print("%s: %s" % (os.path.basename(sys.argv[0]).rsplit(".", 1)[0], e), file=sys.stderr)
        return a, None


def emit(args, runs, text, summary):
    """Print the runs' heading, `text` and `summary`; the heading and text to --md too."""
    out = heading(runs) + text
    print(out + "\n" + summary)
    if args.md:
        with open(args.md, "w") as f:
            f.write(out)

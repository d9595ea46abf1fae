"""Mutation fuzzing of ``elasticopt solve``: seeded mutated instance files, outcome counts.

Usage::

    python validation/fuzz_cli.py                  # 500 files, seed 0, solver dp
    python validation/fuzz_cli.py --files 2500 --seed 1 --show 3

Each file is a mutation of one of ``instances/*.json`` (structure and values:
see :mod:`elasticopt.testing.fuzz`); ``elasticopt solve FILE --json`` runs in
this process.  Printed: the count per outcome (clean error, solved,
infeasible, disagree, crash, error without file or path) and, with
``--show N``, the first N messages of every class that is not clean.
``--details PATH`` writes one JSON line per file, to compare two versions
file by file.  Exit code 1 if any file crashed or gave an error without file
or path.
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from elasticopt.testing.fuzz import OUTCOMES, classify, mutate_text, run_solve

BAD = ("crash", "error without file or path")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=500, help="mutated files to try (default 500)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--instances", default="instances/*.json", help="glob of the valid files to mutate")
    p.add_argument("--solver", default="dp", help="solver passed to 'elasticopt solve' (default dp)")
    p.add_argument("--show", type=int, default=2, help="messages shown per bad class (default 2)")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.add_argument("--details", default=None, metavar="PATH",
                   help="also write one JSON line per file (index, source, outcome, exit code, message)")
    args = p.parse_args(argv)

    sources = sorted(glob.glob(args.instances))
    if not sources:
        p.error(f"no instance files match {args.instances!r}")
    texts = {s: Path(s).read_text(encoding="utf-8") for s in sources}
    rng = random.Random(args.seed)
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    details = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="elasticopt-fuzz-") as tmp:
        for i in range(args.files):
            src = rng.choice(sources)
            path = str(Path(tmp) / f"m{i:05d}-{Path(src).stem}.json")
            Path(path).write_text(mutate_text(texts[src], rng), encoding="utf-8")
            run = run_solve(path, "--solver", args.solver)
            outcome = classify(run, path)
            counts[outcome] += 1
            message = (run.exception or run.stderr.strip()).replace(path, "FILE")
            details.append({"index": i, "source": Path(src).name, "outcome": outcome, "code": run.code,
                            "message": message[:300]})
            if outcome in BAD and len(examples.setdefault(outcome, [])) < args.show:
                examples[outcome].append((run.exception or run.stderr.strip())[-400:])
    wall_s = time.perf_counter() - t0
    if args.details:
        Path(args.details).write_text("".join(json.dumps(d) + "\n" for d in details), encoding="utf-8")
    result = {"files": args.files, "seed": args.seed, "solver": args.solver, "wall_s": round(wall_s, 1),
              "counts": {k: counts[k] for k in OUTCOMES}}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.files} mutated files (seed {args.seed}, solver {args.solver}, {wall_s:.0f} s):")
        for k in OUTCOMES:
            print(f"  {k:28s} {counts[k]:6d}")
        for k, msgs in examples.items():
            for m in msgs:
                print(f"\n[{k}] {m}")
    return 1 if any(counts[k] for k in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())

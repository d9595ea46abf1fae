"""Mutation fuzzing of ``elasticopt solve`` / ``simulate`` / ``launch``: seeded mutated files, outcome counts.

Usage::

    python validation/fuzz_cli.py                  # 500 instance files, seed 0, solver dp
    python validation/fuzz_cli.py --files 2500 --seed 1 --show 3
    python validation/fuzz_cli.py --command simulate --files 1000   # workloads: JSON, per-type JSON, CSV
    python validation/fuzz_cli.py --command launch --files 1000     # jobs files (stopped after loading)
    python validation/fuzz_cli.py --command serve --files 1000      # requests to the allocation service

Each file is a mutation of one of ``instances/*.json`` (structure, values and
bytes: see :mod:`elasticopt.testing.fuzz`); ``elasticopt solve FILE --json`` runs in
this process, each run limited to 10 CPU seconds (past them: ``hang``).  With
``--command simulate`` the files are small generated workloads, with
``--command launch`` the example jobs file (run with an unknown solver, so a file
that loads stops there instead of starting jobs), with ``--command serve`` the instance
files as they are and as requests (``elasticopt-request/1``), each answered by one
in-process ``AllocationService`` (an ``internal`` answer counts as a crash).  Printed: the count per outcome (clean error, solved,
infeasible, disagree, crash, error without file or path) and, with
``--show N``, the first N messages of every class that is not clean.
``--details PATH`` writes one JSON line per file, to compare two versions
file by file.  Exit code 1 if any file crashed or gave an error without file
or path.
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from elasticopt.testing.fuzz import (OUTCOMES, SolveRun, classify, classify_cli, mutate_bytes, mutate_csv, run_cli,
                                     run_request, run_solve)

BAD = ("crash", "error without file or path", "hang")
ROOT = Path(__file__).resolve().parent.parent
NO_SOLVER = "unknown solver 'no-such-solver'"


def _sources(command: str, pattern: str, tmp: str) -> dict[str, str]:
    if command == "solve":
        return {s: Path(s).read_text(encoding="utf-8") for s in sorted(glob.glob(pattern))}
    if command == "serve":
        out = {}
        for s in sorted(glob.glob(pattern)):
            text = Path(s).read_text(encoding="utf-8")
            out[s] = text
            out[f"{s} as a request"] = json.dumps(dict(json.loads(text), format="elasticopt-request/1"))
        return out
    if command == "launch":
        return {"jobs.json": (ROOT / "elasticopt/launcher/examples/jobs_cpu.json").read_text()}
    out = {}
    for name, extra in (("wl.json", ["--gpus", "16"]), ("wl.csv", ["--gpus", "16"]), ("wlh.json", ["--cluster", "sia-64"])):
        path = Path(tmp) / f"source-{name}"
        run_cli(["simulate", "--generate", str(path), "--jobs", "4", "--seed", "3", *extra], timeout_s=None)
        out[name] = path.read_text()
    return out


def _run(command: str, src: str, path: str, solver: str, tmp: str):
    """(run, outcome) of one mutated file."""
    if command == "serve":
        outcome, message = run_request(_service(solver), Path(path).read_bytes())
        return SolveRun(None, "", message, message if outcome in BAD else ""), outcome
    if command == "solve":
        run = run_solve(path, "--solver", solver, timeout_s=10.0)
        return run, classify(run, path)
    if command == "launch":
        run = run_cli(["launch", path, "--solver", "no-such-solver", "--cpu-slots", "1", "--out", tmp], timeout_s=10.0)
        return run, classify_cli(run, path, (2,), accepted=NO_SOLVER)
    cluster = ["--cluster", "sia-64"] if src == "wlh.json" else ["--gpus", "16"]
    run = run_cli(["simulate", path, *cluster, "--quiet", "--policy", "elastic", "--solver", solver, "--horizon-s",
                   "200000"], timeout_s=10.0)
    return run, classify_cli(run, path, (0, 2))


@functools.cache
def _service(solver: str):
    from elasticopt.service import AllocationService

    return AllocationService(default_solver=solver)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--command", choices=["solve", "simulate", "launch", "serve"], default="solve",
                   help="the command whose input files are mutated (default solve)")
    p.add_argument("--files", type=int, default=500, help="mutated files to try (default 500)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--instances", default="instances/*.json", help="glob of the valid files to mutate")
    p.add_argument("--solver", default="dp", help="solver passed to 'elasticopt solve' (default dp)")
    p.add_argument("--show", type=int, default=2, help="messages shown per bad class (default 2)")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.add_argument("--details", default=None, metavar="PATH",
                   help="also write one JSON line per file (index, source, outcome, exit code, message)")
    args = p.parse_args(argv)

    tmp_dir = tempfile.TemporaryDirectory(prefix="elasticopt-fuzz-")
    tmp = tmp_dir.name
    texts = _sources(args.command, args.instances, tmp)
    sources = sorted(texts)
    if not sources:
        p.error(f"no instance files match {args.instances!r}")
    rng = random.Random(args.seed)
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    details = []
    t0 = time.perf_counter()
    with tmp_dir:
        for i in range(args.files):
            src = rng.choice(sources)
            path = str(Path(tmp) / f"m{i:05d}-{Path(src).name}")
            mutate = mutate_csv if src.endswith(".csv") else mutate_bytes
            Path(path).write_bytes(mutate(texts[src], rng))
            run, outcome = _run(args.command, Path(src).name, path, args.solver, tmp)
            counts[outcome] += 1
            message = (run.exception or run.stderr.strip()).replace(path, "FILE")
            details.append({"index": i, "source": Path(src).name, "outcome": outcome, "code": run.code,
                            "message": message[:300]})
            if outcome in BAD and len(examples.setdefault(outcome, [])) < args.show:
                examples[outcome].append((run.exception or run.stderr.strip())[-400:])
    wall_s = time.perf_counter() - t0
    if args.details:
        Path(args.details).write_text("".join(json.dumps(d) + "\n" for d in details), encoding="utf-8")
    result = {"command": args.command, "files": args.files, "seed": args.seed, "solver": args.solver,
              "wall_s": round(wall_s, 1),
              "counts": {k: counts[k] for k in OUTCOMES}}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.command}: {args.files} mutated files (seed {args.seed}, solver {args.solver}, {wall_s:.0f} s):")
        for k in OUTCOMES:
            print(f"  {k:28s} {counts[k]:6d}")
        for k, msgs in examples.items():
            for m in msgs:
                print(f"\n[{k}] {m}")
    return 1 if any(counts[k] for k in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())

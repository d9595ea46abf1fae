"""Run Pollux's own simulator with elasticopt's PolluxPolicy; compare with the artifact's results.

Pollux (OSDI'21) ships a cluster simulator (petuum/adaptdl, branch
``osdi21-artifact``, folder ``simulator/``) that needs its own old
environment (Python 3.8, numpy 1.19).  This script does not contain or
download any of it: point it at your checkout and at that environment's
interpreter, and it runs every workload with the simulator's ``PolluxPolicy``
replaced by elasticopt's drop-in (``elasticopt/integrations/pollux.py``, which
talks to ``elasticopt serve --stdio`` started from this environment)::

    python validation/pollux_simulator.py --simulator ~/adaptdl/simulator \\
        --python ~/envs/pollux/bin/python [--workloads 'workload-*.csv'] \\
        [--published ~/adaptdl/simulator/results/pollux] [--out validation/results/pollux_sim]

How it runs the host: a small runner (written to a temporary folder, run by
``--python`` with the checkout and that folder on ``PYTHONPATH``) imports the
host's ``pollux`` module, sets its ``PolluxPolicy`` to the drop-in's, and
runs the host's ``simulator.py`` as ``__main__`` with ``--sim-args`` (default
``--policy pollux --output {output} {workload}``; ``{workload}`` and
``{output}`` are filled in per workload): nothing in the checkout is modified.

Results: the simulator's output folder (``{output}``) must hold a
``summary.json`` with ``"jcts": {job: seconds}`` (and, if the simulator
records them, ``"num_restarts"`` or ``"restarts"``: {job: count}); the
published results are read the same way from ``--published/<workload>/``, or
from a CSV with columns ``job``/``name``, ``jct`` (or ``completion_time`` and
``submission_time``) and optionally ``num_restarts``.  The table prints mean
and p99 JCT (hours) and restarts per job, ours next to the published figures.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from elasticopt._io import atomic_write_text
from elasticopt.errors import ElasticoptError
from elasticopt.integrations import pollux as _dropin

DROPIN = Path(_dropin.__file__)  # the drop-in file, copied into a temporary folder for the host
DEFAULT_SIM_ARGS = "--policy pollux --output {output} {workload}"

RUNNER = '''\
import os, runpy, sys
import pollux as host_pollux
import elasticopt_pollux
command = os.environ["ELASTICOPT_COMMAND"].split("\\x1f")


class PolluxPolicy(elasticopt_pollux.PolluxPolicy):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("command", command)
        super().__init__(*args, **kwargs)


host_pollux.PolluxPolicy = PolluxPolicy
sys.argv = [os.environ["POLLUX_SIMULATOR"]] + sys.argv[1:]
runpy.run_path(os.environ["POLLUX_SIMULATOR"], run_name="__main__")
'''


def _fail(msg: str) -> ElasticoptError:
    return ElasticoptError(msg)


def check_inputs(simulator: Path, python: str, pattern: str) -> list[Path]:
    """The workload files; a clear error for a checkout or interpreter that is not usable."""
    if not (simulator / "simulator.py").is_file():
        raise _fail(f"--simulator {simulator}: expected Pollux's simulator folder (with simulator.py), "
                    "e.g. adaptdl/simulator on branch osdi21-artifact")
    if not (simulator / "pollux.py").is_file():
        raise _fail(f"--simulator {simulator}: no pollux.py there (the module whose PolluxPolicy is replaced)")
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise _fail(f"--python {python}: cannot run it ({exc.strerror})") from None
    if out.returncode != 0:
        raise _fail(f"--python {python}: exited with {out.returncode}: {out.stderr.strip()[-300:]}")
    workloads = sorted(Path(p) for p in glob.glob(str(simulator / "workloads" / pattern)))
    if not workloads:
        raise _fail(f"no workload matches {simulator / 'workloads' / pattern}")
    return workloads


def load_results(path: Path) -> dict[str, dict[str, float]]:
    """``{"jct": {job: s}, "restarts": {job: n}}`` from a summary.json, a folder holding one, or a CSV."""
    if path.is_dir():
        path = path / "summary.json"
    if not path.is_file():
        raise _fail(f"{path}: no results file")
    if path.suffix == ".csv":
        jct, restarts = {}, {}
        with open(path, newline="") as fh:
            for i, row in enumerate(csv.DictReader(fh)):
                job = row.get("job") or row.get("name") or f"row {i + 2}"
                if row.get("jct"):
                    jct[job] = float(row["jct"])
                elif row.get("completion_time") and row.get("submission_time"):
                    jct[job] = float(row["completion_time"]) - float(row["submission_time"])
                else:
                    raise _fail(f"{path}: row {i + 2}: expected a 'jct' or 'completion_time'+'submission_time'")
                if row.get("num_restarts"):
                    restarts[job] = float(row["num_restarts"])
        return {"jct": jct, "restarts": restarts}
    try:
        doc = json.loads(path.read_text())
    except ValueError as exc:
        raise _fail(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jcts"), dict):
        raise _fail(f"{path}: expected an object with 'jcts': {{job: seconds}}")
    restarts = doc.get("num_restarts", doc.get("restarts", {}))
    return {"jct": {str(k): float(v) for k, v in doc["jcts"].items()},
            "restarts": {str(k): float(v) for k, v in (restarts or {}).items()}}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, linear interpolation between closest ranks (numpy's default)."""
    xs = sorted(values)
    if not xs:
        return math.nan
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(res: dict[str, dict[str, float]]) -> dict[str, float]:
    """Jobs, mean and p99 JCT in hours, mean restarts per job (nan if not recorded)."""
    jcts = list(res["jct"].values())
    rs = list(res["restarts"].values())
    return {
        "jobs": len(jcts),
        "mean_jct_h": (sum(jcts) / len(jcts) / 3600) if jcts else math.nan,
        "p99_jct_h": percentile(jcts, 99) / 3600,
        "restarts": (sum(rs) / len(rs)) if rs else math.nan,
    }


def table(rows: list[tuple[str, dict[str, float], dict[str, float] | None]]) -> str:
    """Markdown table: ours next to the published figures, and the ratio of mean JCTs."""
    head = ("| workload | jobs | mean JCT h | p99 JCT h | restarts/job | published mean h | published p99 h "
            "| published restarts | mean ratio |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for name, ours, pub in rows:
        p = pub or {"mean_jct_h": math.nan, "p99_jct_h": math.nan, "restarts": math.nan}
        ratio = ours["mean_jct_h"] / p["mean_jct_h"] if p["mean_jct_h"] == p["mean_jct_h"] and p["mean_jct_h"] else math.nan
        lines.append(f"| {name} | {ours['jobs']:.0f} | {ours['mean_jct_h']:.3f} | {ours['p99_jct_h']:.3f} | "
                     f"{ours['restarts']:.2f} | {p['mean_jct_h']:.3f} | {p['p99_jct_h']:.3f} | {p['restarts']:.2f} | "
                     f"{ratio:.3f} |")
    return "\n".join(lines) + "\n"


def run_workload(simulator: Path, python: str, workload: Path, out: Path, sim_args: str, serve: list[str]) -> Path:
    """Run the host's simulator on one workload with the drop-in policy; returns its output folder."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eo-pollux-") as tmp:
        (Path(tmp) / "elasticopt_pollux.py").write_text(DROPIN.read_text())
        (Path(tmp) / "eo_runner.py").write_text(RUNNER)
        env = dict(os.environ, POLLUX_SIMULATOR=str(simulator / "simulator.py"),
                   ELASTICOPT_COMMAND="\x1f".join(serve),
                   PYTHONPATH=os.pathsep.join([str(simulator), tmp]))
        args = shlex.split(sim_args.format(workload=str(workload), output=str(out)))
        proc = subprocess.run([python, str(Path(tmp) / "eo_runner.py"), *args], cwd=simulator, env=env)
    if proc.returncode != 0:
        raise _fail(f"the simulator exited with {proc.returncode} on {workload.name}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simulator", type=Path, required=True, help="your checkout's simulator/ folder")
    ap.add_argument("--python", required=True, help="the interpreter of the simulator's environment")
    ap.add_argument("--workloads", default="*.csv", help="glob inside simulator/workloads (default *.csv)")
    ap.add_argument("--published", type=Path, default=None,
                    help="folder with the artifact's results: <workload>/summary.json or <workload>.csv")
    ap.add_argument("--sim-args", default=DEFAULT_SIM_ARGS, help=f"simulator arguments (default {DEFAULT_SIM_ARGS!r})")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "pollux_sim")
    ap.add_argument("--reuse", action="store_true", help="read existing outputs instead of running the simulator")
    a = ap.parse_args(argv)
    try:
        workloads = check_inputs(a.simulator, a.python, a.workloads)
        serve = [sys.executable, "-m", "elasticopt", "serve", "--stdio"]
        rows = []
        for w in workloads:
            out = a.out / w.stem
            if not a.reuse:
                run_workload(a.simulator, a.python, w, out, a.sim_args, serve)
            ours = summarize(load_results(out))
            pub = None
            if a.published is not None:
                cands = [a.published / w.stem, a.published / f"{w.stem}.csv", a.published / f"{w.stem}.json"]
                found = next((c for c in cands if c.exists()), None)
                pub = summarize(load_results(found)) if found else None
            rows.append((w.stem, ours, pub))
    except ElasticoptError as exc:
        print(f"pollux_simulator: error: {exc}", file=sys.stderr)
        return 2
    text = table(rows)
    print(text, end="")
    atomic_write_text(a.out / "table.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

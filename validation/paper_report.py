"""The paper comparison's report: markdown tables per cell with seeds, and the load plot.

Used by ``validation/paper_comparison.py`` (rows from its ``summarise``); no simulation here.
"""

from __future__ import annotations

import math

from elasticopt.plotting import new_figure, save_figure


def _f(x: float, d: int = 2) -> str:
    return "-" if x is None or x != x else f"{x:.{d}f}"


def _ms(s: dict, d: int = 1, scale: float = 1.0) -> str:
    """``mean ± sd`` of a stats dict (scaled)."""
    if s["n"] == 0:
        return "-"
    return f"{s['mean'] / scale:.{d}f} ± {s['sd'] / scale:.{d}f}"


def _range(s: dict, d: int = 2) -> str:
    """``mean [min, max]`` of a ratio's stats."""
    if s["n"] == 0:
        return "-"
    return f"{s['mean']:.{d}f} [{s['min']:.{d}f}, {s['max']:.{d}f}]"


def _verdict(r: dict) -> str:
    ok = "yes" if r["done_ok"] and r["jct_ok"] else "**NO**"
    worse = []
    if r["seeds_done_worse"]:
        worse.append(f"done in {r['seeds_done_worse']}")
    if r["seeds_jct_worse"]:
        worse.append(f"JCT in {r['seeds_jct_worse']}")
    return ok + (f" (seeds worse: {', '.join(worse)})" if worse else "")


def plot(rows: list[dict], path, policies) -> None:
    """Jobs done by the horizon and mean JCT against load, per cluster, with the seeds' sd as error bars."""
    clusters = sorted({r["gpus"] for r in rows})
    if not clusters:
        return
    fig, axes = new_figure(5 * len(clusters), 7, 2, len(clusters))
    for c, gpus in enumerate(clusters):
        rs = sorted((r for r in rows if r["gpus"] == gpus), key=lambda r: r["load"])
        loads = [r["load"] for r in rs]
        for pol, style in zip(policies, ("o-", "s--", "^:")):
            done = [r[f"{pol}:done"] for r in rs]
            jct = [r[f"{pol}:jct_mean_s"] for r in rs]
            axes[0][c].errorbar(loads, [d["mean"] / r["jobs"] for d, r in zip(done, rs)],
                                yerr=[d["sd"] / r["jobs"] for d, r in zip(done, rs)], fmt=style, capsize=3, label=pol)
            axes[1][c].errorbar(loads, [j["mean"] / 3600 for j in jct], yerr=[j["sd"] / 3600 for j in jct],
                                fmt=style, capsize=3, label=pol)
        axes[0][c].set_title(f"{gpus} GPUs")
        axes[0][c].set_ylabel("fraction of jobs completed by the horizon")
        axes[1][c].set_ylabel("mean JCT, all jobs to completion (h)")
        axes[1][c].set_yscale("log")
        for ax in axes[:, c]:
            ax.set_xscale("log")
            ax.set_xlabel("offered load")
            ax.grid(alpha=0.3)
        axes[0][c].legend(fontsize=8)
    save_figure(fig, path)


def _cell_table(rows: list[dict], admission: bool) -> list[str]:
    head = "| GPUs | load | restart (s) | batch |"
    sep = "|---|---|---|---|"
    if admission:
        head += " jobs | deadline (s) | dropped el | dropped fb | dropped st | dropped fb/el |"
        sep += "---|---|---|---|---|---|"
    head += " done el | done fb | done st | **done el/fb** | JCT el (h) | JCT fb (h) | JCT st (h) | **JCT fb/el** |"
    sep += "---|---|---|---|---|---|---|---|"
    if admission:
        head += " JCT both el (h) | JCT both fb (h) | JCT both fb/el |"
        sep += "---|---|---|"
    head += " rescales/job el | elastic >= fb |"
    sep += "---|---|"
    out = [head, sep]
    for r in rows:
        line = f"| {r['gpus']} | {r['load']:g} | {r['restart_cost_s']:g} | {r['submitted_batch']} |"
        if admission:
            line += (f" {r['jobs']} | {r['admission_deadline_s']:g} | {_ms(r['elastic:dropped'])} | {_ms(r['fixed-batch:dropped'])} "
                     f"| {_ms(r['static:dropped'])} | {_range(r['dropped_ratio'])} |")
        line += (f" {_ms(r['elastic:done'])} | {_ms(r['fixed-batch:done'])} | {_ms(r['static:done'])} "
                 f"| **{_range(r['done_ratio'])}** | {_ms(r['elastic:jct_mean_s'], 2, 3600)} "
                 f"| {_ms(r['fixed-batch:jct_mean_s'], 2, 3600)} | {_ms(r['static:jct_mean_s'], 2, 3600)} "
                 f"| **{_range(r['jct_ratio'])}** |")
        if admission:
            line += (f" {_ms(r['elastic:jct_common_s'], 2, 3600)} | {_ms(r['fixed-batch:jct_common_s'], 2, 3600)} "
                     f"| {_range(r['jct_common_ratio'])} |")
        line += f" {_f(r['elastic:rescales_per_job']['mean'])} | {_verdict(r)} |"
        out.append(line)
    return out


def _best(rows: list[dict], key: str) -> dict | None:
    ok = [r for r in rows if r[key]["n"] and not math.isnan(r[key]["mean"])]
    return max(ok, key=lambda r: r[key]["mean"]) if ok else None


def _where(r: dict) -> str:
    s = f"{r['gpus']} GPUs, load {r['load']:g}, restart {r['restart_cost_s']:g} s, batch {r['submitted_batch']}"
    if r["admission_deadline_s"] is not None:
        s += f", deadline {r['admission_deadline_s']:g} s"
    return s


def markdown(rows: list[dict], args, wall_s: float, seeds) -> str:
    """The whole report."""
    main = [r for r in rows if r["group"] == "main"]
    sens = [r for r in rows if r["group"] == "sensitivity"]
    paper = [r for r in rows if r["group"] == "paper"]
    lines = [
        "# elastic vs fixed-batch vs static (paper comparison)",
        "",
        f"Generated by `python validation/paper_comparison.py {args.argv}` in {wall_s:.0f} s wall "
        f"(solver `{args.solver}`, seeds {', '.join(map(str, seeds))}, t4/* profiles, Philly sizes and "
        "durations clipped at 48 h, 2 jobs per GPU and at least 100, Poisson arrivals at the offered load). "
        "Every run goes until every job is done or dropped. *done* = jobs completed by the horizon (= the "
        "last arrival); *JCT* = mean JCT over every completed job; *dropped* = jobs turned away by admission "
        "control. Figures are `mean ± sd` over the seeds; ratios are `mean [min, max]` of the per-seed "
        "ratios (done elastic/fixed-batch, JCT fixed-batch/elastic, dropped fixed-batch/elastic). "
        "*elastic >= fb*: the seeds' mean of elastic's done is at least fixed-batch's and its mean JCT "
        "at most fixed-batch's; the seeds where one of them is not are counted.",
        "",
    ]
    for name, rs in (("main", main), ("sensitivity", sens), ("paper", paper)):
        if not rs:
            continue
        n_ok = sum(r["done_ok"] and r["jct_ok"] for r in rs)
        lines.append(f"- **{name}**: elastic >= fixed-batch on jobs done and <= on mean JCT in **{n_ok} of "
                     f"{len(rs)}** cells (seed means); per seed, done lower in "
                     f"{sum(r['seeds_done_worse'] for r in rs)} and JCT higher in "
                     f"{sum(r['seeds_jct_worse'] for r in rs)} of {sum(len(r['seeds']) for r in rs)} points.")
    if main:
        lines += ["", "## Load sweep (restart cost 30 s, random submitted batch)", ""] + _cell_table(main, False)
        lines += ["", "![jobs completed and mean JCT vs load](paper_comparison.png)"]
    if sens:
        lines += ["", "## Sensitivity: restart cost and submitted batch, every load", ""] + _cell_table(sens, False)
    if paper:
        lines += ["", "## Admission control: the paper's dropped jobs", "",
                  "A job not started within the deadline of its arrival is dropped (deadline 0: a job that "
                  "cannot start at once is turned away). Each policy's mean JCT is over the jobs it completed, "
                  "so a policy that drops the long jobs looks faster; *JCT both* is over the jobs both elastic "
                  "and fixed-batch completed, and the verdict uses it.", ""] + _cell_table(paper, True)
    lines += ["", "## Findings", ""]
    for label, rs in (("load sweep", main), ("sensitivity grid", sens), ("admission control", paper)):
        bc, bj = _best(rs, "done_ratio"), _best(rs, "jct_ratio")
        if bc is not None and bj is not None:
            lines.append(f"- {label}: largest done ratio **{_f(bc['done_ratio']['mean'])}x** ({_where(bc)}); "
                         f"largest mean-JCT ratio **{_f(bj['jct_ratio']['mean'])}x** ({_where(bj)}).")
    bd = _best(paper, "dropped_ratio")
    if bd is not None:
        lines.append(f"- admission control: largest dropped ratio fixed-batch/elastic **{_f(bd['dropped_ratio']['mean'])}x** "
                     f"({_where(bd)}).")
    lines.append("- The paper: up to ~2x jobs completed, up to ~10x lower mean JCT, ~3x fewer dropped.")
    lines += _setting(rows) + _why() + _tradeoff(paper)
    return "\n".join(lines) + "\n"


def _cells(rows: list[dict], key: str, at_least: float) -> str:
    hit = [r for r in rows if r[key]["n"] and r[key]["mean"] >= at_least]
    if not hit:
        return "none"
    return "; ".join(f"{_where(r)} ({_f(r[key]['mean'])}x)" for r in sorted(hit, key=lambda r: -r[key]["mean"]))


def _setting(rows: list[dict]) -> list[str]:
    """Where the paper's figures are reached, from the rows."""
    return [
        "", "## The paper's setting, and where its figures are reached", "",
        "The paper's abstract states the outcome (up to ~2x the jobs completed of fixed-batch, up to ~10x lower "
        "mean JCT; an author's summary adds ~3x fewer jobs dropped, i.e. admission control), not the setting: "
        "the cluster, trace, batch ranges, restart cost and admission rule of its experiments are not in the "
        "material this project has. The settings here are ours: one pool of 64 or 256 GPUs (8 per node); "
        "Philly job sizes (94 % one GPU, capped at a quarter of the cluster) and durations (clipped at 48 h) "
        "at Poisson arrivals of the offered load; the six t4/* networks with Pollux's measured accuracy-neutral "
        "batch ranges; the submitted batch the largest, smallest or a random feasible batch for the submitted "
        "GPUs (fixed-batch keeps it, static runs exactly it); restart cost 0, 30 or 300 s per start and rescale; "
        "admission control none, or an admission deadline of 0 or 600 s (group *paper*, 8 jobs per GPU: a "
        "longer overload).",
        "",
        f"- Jobs done >= 2x fixed-batch (seed mean of per-seed ratios): {_cells(rows, 'done_ratio', 2.0)}.",
        f"- Mean JCT >= 10x lower than fixed-batch: {_cells(rows, 'jct_ratio', 10.0)}.",
        f"- Dropped >= 3x fewer than fixed-batch (seeds where elastic dropped any): "
        f"{_cells([r for r in rows if r['group'] == 'paper'], 'dropped_ratio', 3.0)}; cells where elastic "
        f"dropped none of fixed-batch's "
        + (", ".join(f"{_f(r['fixed-batch:dropped']['mean'], 1)} ({_where(r)})" for r in rows
                     if r["group"] == "paper" and r["elastic:dropped"]["max"] == 0 and r["fixed-batch:dropped"]["mean"] > 0)
           or "none") + ".",
    ]


def _span(rs: list[dict], key: str) -> str:
    vals = [r[key]["mean"] for r in rs if r[key]["n"]]
    return f"{min(vals):.2f}-{max(vals):.2f}" if vals else "-"


def _tradeoff(paper: list[dict]) -> list[str]:
    """The admission cells where elastic is not at least as good: what it trades there (from the rows)."""
    bad = [r for r in paper if not (r["done_ok"] and r["jct_ok"])]
    if not bad:
        return []
    return [
        f"- **Where elastic is not >= fixed-batch** ({len(bad)} admission cells: "
        + ", ".join(sorted({f'batch {r["submitted_batch"]}' for r in bad})) + "): elastic admits jobs that "
        f"fixed-batch drops (dropped fb/el {_span(bad, 'dropped_ratio')} where elastic dropped any) and serves "
        f"them on the same GPUs, so the jobs both complete take longer (JCT both fb/el {_span(bad, 'jct_common_ratio')}; "
        f"done el/fb {_span(bad, 'done_ratio')}). At a job's deadline the rule lifts every running job's protection "
        "down to its due floor and the policy weighs the job 5x; without the first (measured on the first of these cells, three seeds, "
        "the weight kept) elastic drops about as many jobs as fixed-batch and completes fewer by the horizon. This is the one part of "
        "the grid where elastic trades mean JCT for jobs served; the defect's grid (sensitivity, no admission "
        "control) has none.",
    ]


def _why() -> list[str]:
    return [
        "", "## Why (and where not)", "",
        "- **The submitted batch decides both gaps.** Where users submit the smallest batch of the range, "
        "fixed-batch is stuck at a small, inefficient per-GPU batch that elastic raises: the JCT gap is "
        "largest there (light load: elastic gives a job a large batch on many GPUs, fixed-batch can only add "
        "GPUs at its batch, whose local batch then shrinks and whose scaling collapses), and so is the "
        "jobs-done gap under heavy load. Where they submit the largest batch, fixed-batch is already "
        "efficient and both gaps are smallest.",
        "- **Jobs done is capped by the trace.** Elastic can run more jobs at once than fixed-batch only where a "
        "job's submitted batch needs several GPUs (b > max_local): 94 % of Philly jobs ask for one GPU and most "
        "submitted batches fit one, so fixed-batch packs almost as densely, and elastic's extra completions come "
        "mostly from finishing jobs sooner; and durations are long-tailed, "
        "so many jobs cannot finish by the horizon under any policy. Each run has a finite burst of jobs "
        "(2 per GPU; 8 in the admission group), so the baselines' queues, and the ratios, stop growing with load.",
        "- **Admission control** turns fixed-batch's slower service into lost jobs: a job dropped is never "
        "served, so the jobs-completed gap widens with the deadline's strictness, and elastic's mean JCT over "
        "its own completed jobs includes the long jobs fixed-batch dropped (compare *JCT both*).",
        "- **The rule that yields to queued work** (docs/design.md §4) is what keeps elastic at or above "
        "fixed-batch where users submit their largest batch: without it, a job that took the GPUs of an idle "
        "cluster at a large batch held them through its cool-down and behind the rescale penalty while "
        "arrivals queued (0.89x the jobs of fixed-batch in the report before it). Yielding costs rescales: "
        "they rise with load and most under a 0-s deadline, where every arrival that cannot start at once "
        "lifts every running job's protection.",
        "- **Rate floors under admission control** (docs/design.md §4): elastic admits a job only at >= 0.75x "
        "the rate of its submitted (k, b), and at a job's deadline shrinks running jobs only down to 0.5x theirs "
        "(or their rate now), weighing the due job 5x. Without them, where users submit their largest batch, "
        "elastic admitted jobs at a fraction of their rate and shrank running ones far below theirs to admit "
        "more, and the jobs both policies completed took longer than under fixed-batch in the four admission "
        "cells of that batch (JCT both fb/el 0.85-0.99 in the report before the floors). fixed-batch keeps the "
        "settings it had (no floors, due weight 10).",
        "- **Restart cost** (0-300 s; ~10 s measured for torchrun, docs/design.md §5) narrows the gaps at "
        "heavy load, where it is paid by more jobs, but does not reverse them.",
    ]

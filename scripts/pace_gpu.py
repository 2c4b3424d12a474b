"""PACE on ATSP at GPU size: train the edit ranker at n = 200, evaluate on ATSP-500 (issue 32, section 4).

1. Teacher (CPU, a process pool): ``--train-instances`` "tmat" ATSP-200 instances (``tmat_atsp``; instance k
   drawn from ``default_rng([seed, k])``, so the data do not depend on the number of workers), each solved by
   the atsp recipe's teacher (``pretrained.teacher("atsp")``: elkai / LKH-3, one run) and turned into listwise
   examples by ``ranker.training_examples`` (``--states`` per instance), the rule ``pretrained`` uses at n = 50.
2. Training (``--device``): ``ranker.train_ranker`` with the model and batches on the device and a deadline
   (the epochs finished by then are kept).
3. Evaluation (CPU, a process pool, the ranker copied to every worker): ``--eval-instances`` tmat ATSP-500
   instances (instance i from ``default_rng([seed, 4, 500, i])``, the stream ``neurips26 run pace`` draws its
   ATSP instances from). Reference: elkai with ``--elkai-long`` runs (and one run, kept as a baseline; the
   reference is the better of the two). PACE (``PaceSolver``, depth ``--depth``, width ``--width``) with the
   trained ranker ("learned": the committed edit drawn from softmax(scores), T = 1; "learned_argmax": the
   top-ranked edit) and with ``RandomRanker`` ("random"), each run once with rounds = max(B): a run with more
   rounds extends the run with fewer (the solver's nondegradation (i); the test checks it), so the best cost
   and the time after round B are those of a solve with budget B. B = 0 is the constructive trajectory alone.
   Gaps are percent of the reference. The paper's headline (ATSP-500 0.247 %) is quoted beside ours: it is
   the paper's figure (its model, its reference), not measured here.

``--max-minutes`` (default 9) guards the wall time: the teacher stops taking instances at 35 % of it, the
training at 55 % (both keep what they have), and PACE's solves get a time limit that ends 20 s before it
(a solve that stops early leaves the budgets it did not reach empty; the summary counts instances per B).

Usage: python scripts/pace_gpu.py --out results/gpu/pace_atsp500.json [--train-instances 512] [--eval-instances 16]
       python scripts/pace_gpu.py --device cpu --tiny --out /tmp/pace_tiny.json   # a smoke test of the script
Writes one JSON file (a temporary file, then a rename): settings, device, the training record (examples,
per-epoch losses, seconds per phase), per-instance results (reference, every arm and budget, the final tours)
and the summary; prints a table.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from neurips26._atomic import atomic_write_text
from neurips26.combinatorial.pace import ATSPTask, Budget, EditRanker, PaceSolver, RandomRanker, tmat_atsp
from neurips26.combinatorial.pace.baselines import ElkaiATSP
from neurips26.combinatorial.pace.pretrained import recipe, teacher, teacher_name
from neurips26.combinatorial.pace.ranker import save_ranker, train_ranker, training_examples
from neurips26.reproduce.pace import _FAMILY_CODE, _gap, _one_thread

PAPER_ATSP500_GAP = 0.247  # %, the paper's headline figure (GPU-trained; its own reference and instances)
ARMS = {"learned": 1.0, "learned_argmax": 0.0, "random": -1.0}  # the ranker's temperature; -1: RandomRanker
ATSP_FAMILY_CODE = _FAMILY_CODE["atsp"]  # reproduce.pace's instance stream: default_rng([seed, code, n, index])
DEFAULTS = dict(n_train=200, train_instances=512, states=12, epochs=12, batch=32, lr=2e-3, hidden=32, layers=3,
                n_eval=500, eval_instances=16, budgets=[1, 4, 16], elkai_long=10, depth=8, width=2)
TINY = dict(DEFAULTS, n_train=20, train_instances=8, epochs=3, n_eval=30, eval_instances=2, budgets=[1, 2],
            elkai_long=2)
TEACHER_SHARE, TRAIN_SHARE, EVAL_MARGIN_S = 0.35, 0.55, 20.0


def _log(t0: float, msg: str) -> None:
    print(f"[{time.perf_counter() - t0:7.1f} s] {msg}", flush=True)


# ---------------------------------------------------------------- workers (top level: spawned processes import them)

_WORKER: dict = {}


def _init_worker(weights=None) -> None:
    torch.set_num_threads(1)
    _WORKER.clear()
    if weights is not None:
        _WORKER["model"] = _model_from(weights)


def _model_from(weights: dict) -> EditRanker:
    model = EditRanker(weights["dims"], weights["hidden"], weights["layers"])
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights["state"].items()})
    return model.eval()


def teach(job: tuple) -> dict:
    """One training instance: generate, solve by the recipe's teacher, make listwise examples."""
    k, n, states, seed = job
    task, ref = teacher("atsp")
    rng = np.random.default_rng([seed, k])
    inst = tmat_atsp(n, rng)
    t0 = time.perf_counter()
    sol = ref.solve(inst, seed=k + 1)  # pretrained._data's seed rule (elkai ignores it: LKH's fixed seed)
    t1 = time.perf_counter()
    examples = training_examples(task, inst, sol.sol, rng, n_states=states)
    return dict(k=k, examples=examples, teacher_s=t1 - t0, examples_s=time.perf_counter() - t1)


def evaluate(job: dict) -> dict:
    """One ATSP evaluation instance: elkai reference, then every arm once with rounds = max(B)."""
    i, n, seed = job["index"], job["n"], job["seed"]
    inst = tmat_atsp(n, np.random.default_rng([seed, ATSP_FAMILY_CODE, n, i]))
    task = ATSPTask()
    long = ElkaiATSP(runs=job["elkai_long"]).solve(inst)
    one = ElkaiATSP(runs=1).solve(inst)
    ref_sol = long if long.cost <= one.cost else one
    ref = float(ref_sol.cost)
    out = dict(index=i, ref_cost=ref, ref_time_s=long.stats["wall_s"], ref_tour=np.asarray(ref_sol.sol).tolist(),
               elkai_1run=dict(cost=float(one.cost), gap=_gap(one.cost, ref), time_s=one.stats["wall_s"]), arms={})
    Bs = [0, *job["budgets"]]
    for arm in job["arms"]:
        left = None if job["deadline"] is None else job["deadline"] - time.time()
        if left is not None and left <= 0:
            out["arms"][arm] = dict(rows=[dict(B=B, cost=None, gap=None, time_s=None) for B in Bs], tour=None,
                                    cost=None, rounds_done=0, stopped="max_minutes")
            continue
        temp = ARMS[arm]
        solver = PaceSolver(task, RandomRanker()) if temp < 0 else PaceSolver(task, _WORKER["model"], temperature=temp)
        sol = solver.solve(inst, Budget(depth=job["depth"], rounds=max(job["budgets"]), width=job["width"],
                                        time_s=left), seed=i)
        best, at = sol.stats["round_best"], sol.stats["round_time_s"]
        rows = [dict(B=B, cost=float(best[B]), gap=_gap(best[B], ref), time_s=float(at[B])) if B < len(best)
                else dict(B=B, cost=None, gap=None, time_s=None) for B in Bs]
        out["arms"][arm] = dict(rows=rows, tour=np.asarray(sol.sol).tolist(), cost=float(sol.cost),
                                rounds_done=int(sol.stats["rounds_done"]), stopped=sol.stats["stopped"])
    return out


def _pool_map(fn, jobs: list, workers: int, weights, stop_at: float | None, on_result) -> bool:
    """Run ``fn`` over ``jobs`` (in process when ``workers`` is 1, else on spawned processes, one torch
    thread each); ``on_result(result)`` as they finish. Stops waiting at ``stop_at`` (perf_counter
    time; None: never): returns True when every job finished."""
    if workers == 1:
        with _one_thread():
            _WORKER.clear()
            if weights is not None:
                _WORKER["model"] = _model_from(weights)
            try:
                for job in jobs:
                    if stop_at is not None and time.perf_counter() > stop_at:
                        return False
                    on_result(fn(job))
            finally:
                _WORKER.clear()
        return True
    ctx = multiprocessing.get_context("spawn")  # safe after CUDA was initialized in this process
    with ctx.Pool(min(workers, len(jobs)), initializer=_init_worker, initargs=(weights,)) as pool:
        it = pool.imap_unordered(fn, jobs)
        for _ in range(len(jobs)):
            try:
                timeout = None if stop_at is None else max(stop_at - time.perf_counter(), 0.001)
                on_result(it.next(timeout=timeout))
            except multiprocessing.TimeoutError:
                return False  # leaving the block terminates the pool
    return True


# ---------------------------------------------------------------- training

# ---------------------------------------------------------------- summary and table

def summarize(instances: list[dict], arms: list[str], budgets: list[int]) -> dict:
    """Mean (and std) gap and time per arm and B over the instances that reached B; the elkai
    one-run baseline; learned vs random per B (mean paired difference, wins, losses)."""
    Bs = [0, *budgets]
    out: dict = {"arms": {}, "learned_vs_random": {}}
    for arm in arms:
        out["arms"][arm] = {}
        for k, B in enumerate(Bs):
            rows = [r["arms"][arm]["rows"][k] for r in instances if r["arms"][arm]["rows"][k]["gap"] is not None]
            g = np.array([r["gap"] for r in rows])
            out["arms"][arm][str(B)] = dict(
                instances=len(rows), gap_mean=float(g.mean()) if len(g) else None,
                gap_std=float(g.std()) if len(g) else None,
                time_s_mean=float(np.mean([r["time_s"] for r in rows])) if rows else None)
    if instances:
        out["elkai_1run"] = dict(gap_mean=float(np.mean([r["elkai_1run"]["gap"] for r in instances])),
                                 time_s_mean=float(np.mean([r["elkai_1run"]["time_s"] for r in instances])))
        out["reference_time_s_mean"] = float(np.mean([r["ref_time_s"] for r in instances]))
    for arm in (a for a in arms if a != "random"):
        if "random" not in arms:
            break
        per_b = {}
        for k, B in enumerate(Bs):
            pairs = [(r["arms"][arm]["rows"][k]["gap"], r["arms"]["random"]["rows"][k]["gap"]) for r in instances]
            d = np.array([a - b for a, b in pairs if a is not None and b is not None])
            per_b[str(B)] = dict(pairs=len(d), diff_mean=float(d.mean()) if len(d) else None,
                                 wins=int((d < -1e-12).sum()), losses=int((d > 1e-12).sum()))
        out["learned_vs_random"][arm] = per_b
    return out


def _table(res: dict) -> str:
    S, s = res["settings"], res["summary"]
    Bs = [0, *S["budgets"]]
    fmt = lambda v, f="{:.3f}": "-" if v is None else f.format(v)  # noqa: E731
    lines = [f"ATSP-{S['n_eval']}: gap % to elkai (best of {S['elkai_long']} runs and 1 run), mean over instances "
             f"(n = instances that reached B); ranker trained at n = {S['n_train']} on {res['device']['name']}",
             "| arm | " + " | ".join(f"B={B}" for B in Bs) + f" | time s at B={Bs[-1]} |",
             "|---|" + "---|" * (len(Bs) + 1)]
    for arm, per in s["arms"].items():
        cells = [f"{fmt(per[str(B)]['gap_mean'])} (n={per[str(B)]['instances']})" for B in Bs]
        lines.append(f"| PACE {arm} | " + " | ".join(cells) + f" | {fmt(per[str(Bs[-1])]['time_s_mean'], '{:.1f}')} |")
    if "elkai_1run" in s:
        lines.append(f"| elkai, 1 run (no B) | {fmt(s['elkai_1run']['gap_mean'])} |" + " - |" * (len(Bs) - 1)
                     + f" {s['elkai_1run']['time_s_mean']:.1f} |")
    ours = s["arms"].get("learned", {}).get(str(Bs[-1]), {}).get("gap_mean")
    lines.append(f"PACE learned, B = {Bs[-1]}: {fmt(ours)} % (ours, this run) | paper, ATSP-500: "
                 f"{PAPER_ATSP500_GAP} % (the paper's figure, quoted, not ours)")
    return "\n".join(lines)


# ---------------------------------------------------------------- main

def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = DEFAULTS
    ap.add_argument("--out", type=Path, default=Path("results/gpu/pace_atsp500.json"))
    ap.add_argument("--device", default="cuda", help="where the ranker trains (evaluation runs on the CPU pool)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes for teacher and evaluation")
    ap.add_argument("--n-train", type=int, default=d["n_train"], help="ATSP size of the training instances")
    ap.add_argument("--train-instances", type=int, default=d["train_instances"])
    ap.add_argument("--states", type=int, default=d["states"], help="listwise examples drawn per training instance")
    ap.add_argument("--epochs", type=int, default=d["epochs"])
    ap.add_argument("--batch", type=int, default=d["batch"])
    ap.add_argument("--lr", type=float, default=d["lr"])
    ap.add_argument("--hidden", type=int, default=d["hidden"])
    ap.add_argument("--layers", type=int, default=d["layers"])
    ap.add_argument("--n-eval", type=int, default=d["n_eval"], help="ATSP size of the evaluation instances")
    ap.add_argument("--eval-instances", type=int, default=d["eval_instances"])
    ap.add_argument("--budgets", type=int, nargs="+", default=d["budgets"], help="refinement rounds B (each >= 1)")
    ap.add_argument("--arms", nargs="+", default=["learned", "random"], choices=list(ARMS))
    ap.add_argument("--elkai-long", type=int, default=d["elkai_long"], help="LKH runs of the reference")
    ap.add_argument("--depth", type=int, default=d["depth"])
    ap.add_argument("--width", type=int, default=d["width"])
    ap.add_argument("--max-minutes", type=float, default=9.0, help="wall-time guard (0: none)")
    ap.add_argument("--save-ranker", type=Path, default=None, help="also write the trained ranker (.pt) here")
    ap.add_argument("--tiny", action="store_true",
                    help="a few-second configuration (checks the script); replaces the size flags")
    return ap


def _settings(args) -> dict:
    """The size settings (``--tiny``: TINY's, replacing the size flags); every flag is checked either way."""
    given = {k: getattr(args, k) for k in DEFAULTS}
    given["budgets"] = list(given["budgets"])
    for size in (given, TINY):
        _check(size)
    if args.workers < 1:
        raise SystemExit(f"--workers must be >= 1, got {args.workers}")
    if not (args.max_minutes >= 0 and np.isfinite(args.max_minutes)):
        raise SystemExit(f"--max-minutes must be >= 0 (0: no guard), got {args.max_minutes}")
    if args.seed < 0:
        raise SystemExit(f"--seed must be >= 0, got {args.seed}")
    size = dict(TINY) if args.tiny else given
    size["budgets"] = sorted(set(size["budgets"]))
    return size


def _check(size: dict) -> None:
    lows = dict(n_train=3, n_eval=3, train_instances=1, eval_instances=1, states=1, epochs=1, batch=1, hidden=1,
                layers=0, elkai_long=1, depth=1, width=1)
    for key, low in lows.items():
        if size[key] < low:
            raise SystemExit(f"--{key.replace('_', '-')} must be >= {low}, got {size[key]}")
    if any(B < 1 for B in size["budgets"]):
        raise SystemExit(f"--budgets must all be >= 1 (refinement rounds), got {size['budgets']}")
    if not (size["lr"] > 0 and np.isfinite(size["lr"])):
        raise SystemExit(f"--lr must be a finite number > 0, got {size['lr']}")


def _device(name: str) -> torch.device:
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError) as e:
        raise SystemExit(f"--device {name!r} is not a torch device ({e})") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: pass --device cpu (training is slow on a CPU) or run on a GPU machine")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise SystemExit(f"--device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return dev


def main(argv=None) -> dict:
    args = _parser().parse_args(argv)
    S = _settings(args)
    dev = _device(args.device)
    t0 = time.perf_counter()
    end = None if args.max_minutes == 0 else t0 + 60.0 * args.max_minutes
    stop = lambda share: None if end is None else t0 + share * (end - t0)  # noqa: E731
    dev_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu ({platform.processor() or 'cpu'})"
    task = ATSPTask()
    r = dict(recipe("atsp", epochs=S["epochs"], instances=S["train_instances"], seed=args.seed), n=S["n_train"],
             states=S["states"])
    _log(t0, f"device {dev_name}; {args.workers} workers; teacher {teacher_name('atsp')} on "
             f"{S['train_instances']} ATSP-{S['n_train']} instances")

    # 1. teacher
    done: dict[int, dict] = {}
    step = max(1, S["train_instances"] // 10)

    def got(res):
        done[res["k"]] = res
        if len(done) % step == 0 or len(done) == S["train_instances"]:
            _log(t0, f"teacher {len(done)}/{S['train_instances']}")

    jobs = [(k, S["n_train"], S["states"], args.seed) for k in range(S["train_instances"])]
    teacher_complete = _pool_map(teach, jobs, args.workers, None, stop(TEACHER_SHARE), got)
    examples = [ex for k in sorted(done) for ex in done[k]["examples"]]
    data_s = time.perf_counter() - t0
    if not examples:
        raise SystemExit("the teacher produced no training examples (raise --max-minutes or --train-instances)")
    _log(t0, f"teacher done: {len(done)} instances, {len(examples)} examples "
             f"(mean elkai {np.mean([d['teacher_s'] for d in done.values()]):.2f} s/instance)")

    # 2. training on the device
    t1 = time.perf_counter()
    model, losses = train_ranker(task, examples, epochs=S["epochs"], batch=S["batch"], lr=S["lr"], hidden=S["hidden"],
                                 layers=S["layers"], seed=args.seed, device=dev, deadline=stop(TRAIN_SHARE),
                                 on_epoch=lambda ep, loss: _log(t0, f"epoch {ep + 1}/{S['epochs']} loss {loss:.4f}"))
    why = "epochs" if len(losses) == S["epochs"] else "max_minutes"
    train_s = time.perf_counter() - t1
    if not losses:
        raise SystemExit("training stopped before one epoch finished (raise --max-minutes)")
    training = dict(teacher=teacher_name("atsp"), recipe=r, instances=len(done), teacher_complete=teacher_complete,
                    examples=len(examples), losses=losses, epochs_done=len(losses), stopped=why, data_s=data_s,
                    train_s=train_s, teacher_s_mean=float(np.mean([d["teacher_s"] for d in done.values()])),
                    examples_s_mean=float(np.mean([d["examples_s"] for d in done.values()])),
                    steps_per_s=len(losses) * -(-len(examples) // S["batch"]) / max(train_s, 1e-9))
    _log(t0, f"trained {len(losses)} epoch(s) in {train_s:.1f} s on {dev_name} ({why})")
    if args.save_ranker is not None:
        save_ranker(model, args.save_ranker, dict(training, device=dev_name))

    # 3. evaluation on the CPU pool
    weights = dict(dims=model.dims, hidden=model.hidden, layers=model.layers,
                   state={k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    deadline = None if end is None else time.time() + (end - time.perf_counter()) - EVAL_MARGIN_S
    jobs = [dict(index=i, n=S["n_eval"], seed=args.seed, elkai_long=S["elkai_long"], budgets=S["budgets"],
                 arms=list(args.arms), depth=S["depth"], width=S["width"], deadline=deadline)
            for i in range(S["eval_instances"])]
    results: dict[int, dict] = {}

    def evaluated(res):
        results[res["index"]] = res
        gaps = ", ".join(f"{a} {v['rows'][-1]['gap']:.3f}" if v["rows"][-1]["gap"] is not None else f"{a} -"
                         for a, v in res["arms"].items())
        _log(t0, f"ATSP-{S['n_eval']} instance {res['index']} ({len(results)}/{S['eval_instances']}): gap % at "
                 f"B={S['budgets'][-1]}: {gaps}; elkai 1 run {res['elkai_1run']['gap']:.3f}")

    t2 = time.perf_counter()
    eval_complete = _pool_map(evaluate, jobs, args.workers, weights,
                              None if end is None else end - EVAL_MARGIN_S / 2, evaluated)
    eval_s = time.perf_counter() - t2
    instances = [results[i] for i in sorted(results)]
    out = dict(
        settings=dict(S, seed=args.seed, workers=args.workers, arms=list(args.arms), device=str(dev),
                      max_minutes=args.max_minutes, tiny=args.tiny,
                      budget_rule="B refinement rounds of `depth` edit steps expanding `width` candidates, read off "
                                  "one solve with rounds = max(B) (a run with more rounds extends one with fewer); "
                                  "B = 0: the constructive trajectory alone",
                      arm_temperatures={a: ARMS[a] for a in args.arms}),
        device=dict(name=dev_name, torch=torch.__version__, cuda=torch.version.cuda, cpu_count=os.cpu_count()),
        training=training, evaluation=dict(complete=eval_complete, instances_done=len(instances), eval_s=eval_s),
        instances=instances, summary=summarize(instances, list(args.arms), S["budgets"]),
        paper=dict(atsp500_gap_pct=PAPER_ATSP500_GAP,
                   note="the paper's headline ATSP-500 gap (its GPU-trained model, its own reference and instances), "
                        "quoted for comparison, not measured here"),
        phases_s=dict(teacher=data_s, train=train_s, eval=eval_s), wall_s=time.perf_counter() - t0)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(out, indent=1))
    _log(t0, f"wrote {args.out}")
    print(_table(out), flush=True)
    return out


if __name__ == "__main__":
    main()

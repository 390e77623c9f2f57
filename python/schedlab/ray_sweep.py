"""Sweeps on Ray: each (point, seed) of a sweep is one Ray task.

The driver (this process) plans the sweep, skips the runs its store already
holds, submits the others, and writes each record into the store as it
arrives, so workers need no shared file system and a killed sweep resumes
from what was stored. The aggregates are then made from the store by the
same code as a local sweep's: byte-identical for the same inputs.

A worker that dies loses only its task, which Ray runs again
(``max_retries``). Each worker process plans the sweep once and keeps it;
hosted schedulers compile once per node, into the node's cache
($SCHEDLAB_CACHE_DIR, else ~/.cache/schedlab), which later runs reuse.

``python -m schedlab.ray_sweep`` is what ``schedlab sweep --ray`` runs: it
reads the sweep as JSON on stdin and prints ``{"ran": N, "errors": [...]}``
as its last line of stdout.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _native

HINT = "backend='ray' needs Ray: pip install 'schedlab[ray]' (from a checkout: pip install '.[ray]')"

# How often Ray runs a task again whose worker died.
MAX_RETRIES = 3

_PLANS: Dict[str, Any] = {}


def _plan(args: Dict[str, Any]) -> Any:
    """The sweep's plan, made once per worker process."""
    key = json.dumps(args, sort_keys=True)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _native.NativeSweep(**args)
    return plan


def run_job(args: Dict[str, Any], index: int) -> Tuple[bool, str]:
    """A Ray task: runs job ``index`` of the sweep; (True, record text) or
    (False, the run's error)."""
    return _plan(args).run_record(index)


class Progress:
    """runs done / total, elapsed and ETA on stderr, redrawn in place."""

    def __init__(self, total: int, done: int, show: bool):
        self.total, self.done, self.show = total, done, show
        self.start = time.monotonic()
        self.first = done
        self.draw()

    def step(self) -> None:
        self.done += 1
        self.draw()

    def draw(self) -> None:
        if not self.show:
            return
        elapsed = time.monotonic() - self.start
        ran = self.done - self.first
        left = self.total - self.done
        eta = f"{elapsed / ran * left:.0f}s" if ran else "?"
        width = 40
        fill = width * self.done // max(self.total, 1)
        sys.stderr.write(f"\r{'#' * fill}{'-' * (width - fill)} {self.done}/{self.total} runs, {elapsed:.0f}s elapsed, eta {eta}  ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.show:
            sys.stderr.write("\n")
            sys.stderr.flush()


def run(args: Dict[str, Any], out: str, address: Optional[str] = None, progress: Optional[bool] = None) -> Tuple[int, List[Tuple[int, str]]]:
    """Runs the sweep's missing runs on Ray, storing each record in ``out``:
    (runs done, [(job index, error)])."""
    try:
        import ray
    except ImportError:
        raise ImportError(HINT) from None
    plan = _native.NativeSweep(**args)
    jobs = plan.jobs
    todo = [i for i in range(len(jobs)) if plan.stored(out, i) is None]
    if progress is None:
        progress = sys.stderr.isatty()
    bar = Progress(len(jobs), len(jobs) - len(todo), progress)
    ran = 0
    errors: List[Tuple[int, str]] = []
    if todo:
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        task = ray.remote(max_retries=MAX_RETRIES)(run_job)
        shared = ray.put(args)
        pending = {task.remote(shared, i): i for i in todo}
        waiting = list(pending)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1, timeout=1.0)
            for ref in done:
                i = pending.pop(ref)
                try:
                    ok, text = ray.get(ref)
                except ray.exceptions.RayError as e:
                    key, seed, point = jobs[i]
                    ok, text = False, f"seed {seed} {' '.join(f'{k}={v}' for k, v in point)}: Ray task failed after {MAX_RETRIES} retries: {type(e).__name__}"
                if ok:
                    plan.store(out, i, text)
                    ran += 1
                else:
                    errors.append((i, text))
                bar.step()
    bar.close()
    return ran, errors


def main() -> int:
    """``schedlab sweep --ray``: the sweep as JSON on stdin."""
    req = json.load(sys.stdin)
    args = {k: req[k] for k in ("text", "file", "seeds", "params", "sets", "features", "sched", "sched_sets", "op_timeout", "machine", "max_wall")}
    try:
        ran, errors = run(args, req["out"], address=req.get("address"), progress=None if not req.get("quiet") else False)
    except ImportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except _native.InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"ran": ran, "errors": errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

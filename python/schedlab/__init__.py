"""schedlab from Python: simulate the Linux CPU scheduler, compare
schedulers, and sweep parameters (locally or on a Ray cluster).

>>> import schedlab
>>> r = schedlab.run("scenarios/nice-hogs.toml", seed=3, set={"duration": "2s"})
>>> r.json["tasks"][0]["runtime_ns"]          # the CLI's --json, as a dict
>>> r.tasks                                   # the CLI's -tasks.csv, as a DataFrame
>>> r.latency("cyclictest").percentiles       # HDR histogram, numpy arrays
>>> c = schedlab.compare("scenarios/cyclictest-normal.toml", sched=["eevdf", "simple"])
>>> s = schedlab.sweep("scenarios/hackbench-threads.toml", seeds=range(1, 4),
...                    params={"workload.0.groups": [1, 2]}, out="sweep-out")

A scenario is a path (str or os.PathLike), a TOML string, or a dict. The
simulator is the CLI's: the same scenario, seed and options give the same
bytes. Long runs release the GIL; Ctrl-C interrupts them.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native

__all__ = ["run", "compare", "sweep", "Result", "Latency", "Comparison", "Sweep", "ScenarioError", "__version__"]

__version__: str = _native.VERSION

Scenario = Union[str, "os.PathLike[str]", Mapping[str, Any]]


class ScenarioError(ValueError):
    """Bad input, as the CLI reports it with exit code 2.

    ``str(e)`` (and ``e.message``) is the CLI's one-line message; ``file``,
    ``line`` and ``field`` are its parts where the message names them
    (``None`` otherwise).
    """

    def __init__(self, message: str, file: Optional[str] = None, line: Optional[int] = None, field: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.field = field


_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*): ")


def _scenario_error(message: str, file: str) -> ScenarioError:
    m = re.match(re.escape(file) + r"(?::(\d+))?: (.*)$", message, re.S)
    if not m:
        return ScenarioError(message)
    line = int(m.group(1)) if m.group(1) else None
    f = _FIELD.match(m.group(2))
    return ScenarioError(message, file=file, line=line, field=f.group(1) if f else None)


class _errors:
    """Turns the native module's bad-input errors into ScenarioError."""

    def __init__(self, file: str):
        self.file = file

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, value, tb) -> bool:
        if kind is not None and issubclass(kind, _native.InputError):
            raise _scenario_error(str(value), self.file) from None
        return False


def _load(scenario: Scenario) -> Tuple[str, str, str]:
    """(text, file, stem) of a scenario given as a path, TOML text or dict."""
    if isinstance(scenario, Mapping):
        with _errors("<dict>"):
            return _native.json_to_toml(json.dumps(scenario)), "<dict>", "scenario"
    if isinstance(scenario, os.PathLike) or (isinstance(scenario, str) and "\n" not in scenario and "=" not in scenario):
        file = os.fspath(scenario)
        try:
            text = Path(file).read_text()
        except OSError as e:
            # The CLI's message for an unreadable scenario (exit code 1).
            raise type(e)(e.errno, f"{file}: cannot read: {e.strerror}") from None
        return text, file, Path(file).stem or "scenario"
    if isinstance(scenario, str):
        return scenario, "<string>", "scenario"
    raise TypeError(f"scenario: expected a path, a TOML string or a dict, not {type(scenario).__name__}")


def _toml_value(v: Any) -> str:
    """A Python value as the TOML literal a --set takes."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as a scenario value")


def _sets(set: Union[None, Mapping[str, Any], Sequence[str]]) -> List[str]:
    """``set={"workload.0.count": 8}`` or ``["workload.0.count=8"]`` as --set values."""
    if set is None:
        return []
    if isinstance(set, Mapping):
        return [f"{k}={_toml_value(v)}" for k, v in set.items()]
    return [str(s) for s in set]


def _switch(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def _features(features: Union[None, Mapping[str, Any], Sequence[str]]) -> List[str]:
    """``{"RUN_TO_PARITY": False}`` (run) or ``{"X": [True, False]}`` (compare) as --feature values."""
    if features is None:
        return []
    if isinstance(features, Mapping):
        out = []
        for k, v in features.items():
            if isinstance(v, (list, tuple)):
                out.append(f"{k}=" + ",".join(_switch(x) for x in v))
            else:
                out.append(f"{k}={_switch(v)}")
        return out
    return [str(f) for f in features]


def _sched_sets(sched_set: Union[None, Mapping[str, Any], Sequence[str]]) -> List[str]:
    if sched_set is None:
        return []
    if isinstance(sched_set, Mapping):
        return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in sched_set.items()]
    return [str(s) for s in sched_set]


def _frame(csv_text: str):
    import pandas as pd

    if not csv_text.strip():
        return pd.DataFrame()
    return pd.read_csv(io.StringIO(csv_text))


class Latency:
    """One workload's wakeup-latency HDR histogram.

    ``values`` (ns) and ``counts`` are numpy arrays, one entry per recorded
    bucket, ascending; ``percentiles`` maps 50, 90, 99, 99.9, 99.99 and 100
    to nanoseconds, as the HDR histogram gives them (the CLI's p50 ... max).
    """

    def __init__(self, name: str, buckets: List[Tuple[int, int]], quantiles: List[Tuple[float, int]]):
        import numpy as np

        self.name = name
        self.values = np.array([b[0] for b in buckets], dtype=np.uint64)
        self.counts = np.array([b[1] for b in buckets], dtype=np.uint64)
        self.percentiles: Dict[float, int] = {round(q * 100, 4): v for q, v in quantiles}

    @property
    def samples(self) -> int:
        """How many latencies were recorded."""
        return int(self.counts.sum())

    def cdf(self):
        """(values in ns, cumulative fraction of samples) for plotting a CDF."""
        import numpy as np

        total = self.counts.sum()
        return self.values, (np.cumsum(self.counts) / total if total else np.zeros(0))

    def __repr__(self) -> str:
        p = ", ".join(f"p{k:g}={v}ns" for k, v in self.percentiles.items())
        return f"Latency({self.name!r}, samples={self.samples}, {p})"


class Result:
    """One simulation's results.

    ``json`` is the dict the CLI's ``--json`` writes (``json_text`` its exact
    text); ``workloads``, ``tasks``, ``cpus`` (and ``cgroups``) are the
    CLI's ``--csv`` tables as pandas DataFrames; ``sched_ext`` is the loaded
    sched_ext scheduler's callback counts (empty without one).
    """

    def __init__(self, native: Any):
        self.json_text: str = native.json
        self.json: Dict[str, Any] = json.loads(native.json)
        self._tables = dict(native.tables)
        self._latency = {name: (b, q) for name, b, q in native.latency}

    def _table(self, name: str):
        return _frame(self._tables.get(name, ""))

    @property
    def workloads(self):
        """The CLI's <scenario>-workloads.csv as a DataFrame."""
        return self._table("workloads")

    @property
    def tasks(self):
        """The CLI's <scenario>-tasks.csv as a DataFrame."""
        return self._table("tasks")

    @property
    def cpus(self):
        """The CLI's <scenario>-cpus.csv as a DataFrame."""
        return self._table("cpus")

    @property
    def cgroups(self):
        """The CLI's <scenario>-cgroups.csv as a DataFrame (empty without cgroups)."""
        return self._table("cgroups")

    @property
    def sched_ext(self):
        """One row per sched_ext_ops callback called: op, calls (with the
        scheduler's name, state and exit); empty when no sched_ext scheduler ran."""
        import pandas as pd

        x = self.json.get("sched_ext")
        if not x:
            return pd.DataFrame(columns=["scheduler", "state", "exit", "op", "calls"])
        exit_ = x.get("exit")
        exit_text = json.dumps(exit_) if exit_ is not None else ""
        rows = [{"scheduler": x["name"], "state": x["state"], "exit": exit_text, "op": op, "calls": n} for op, n in x.get("op_calls", {}).items()]
        return pd.DataFrame(rows, columns=["scheduler", "state", "exit", "op", "calls"])

    def latency(self, workload: str) -> Latency:
        """The wakeup-latency histogram of the workload named ``workload``."""
        if workload not in self._latency:
            have = ", ".join(self._latency) or "none"
            raise KeyError(f"{workload!r}: no latency recorded under that name (workloads with latency: {have})")
        b, q = self._latency[workload]
        return Latency(workload, b, q)

    def __repr__(self) -> str:
        j = self.json
        return f"Result({j['scenario']!r}, scheduler={j['scheduler']!r}, seed={j['seed']}, events={j['events']})"


def run(
    scenario: Scenario,
    seed: Optional[int] = None,
    set: Union[None, Mapping[str, Any], Sequence[str]] = None,
    sched: Optional[str] = None,
    features: Union[None, Mapping[str, Any], Sequence[str]] = None,
    machine: Optional[str] = None,
    sched_set: Union[None, Mapping[str, Any], Sequence[str]] = None,
    op_timeout: Optional[str] = None,
    max_wall: Optional[str] = None,
) -> Result:
    """Simulates ``scenario`` as ``schedlab run`` does.

    ``seed`` overrides the scenario's; ``set`` overrides fields by dotted
    path (``{"workload.0.count": 8, "duration": "2s"}``); ``sched`` runs
    another scheduler (``"eevdf"``, a shipped sched_ext name, ``crate:NAME``
    or a ``.bpf.c`` path); ``features`` switches kernel features
    (``{"RUN_TO_PARITY": False}``); ``machine`` is a preset or CPU count;
    ``max_wall`` (``"30s"``) stops the run after that much wall time, and
    ``json["partial"]`` then says so (the figures cover what was simulated).
    Raises ScenarioError on bad input, OSError when a file cannot be read.
    """
    text, file, _ = _load(scenario)
    with _errors(file):
        sched_sets, feature_sets = _native.option_sets(sched, _sched_sets(sched_set), op_timeout, _features(features))
        sets = _sets(set) + sched_sets
        if seed is not None:
            sets.append(f"seed={int(seed)}")
        sets += feature_sets
        return Result(_native.run(text, file, sets, machine, max_wall))


class Comparison:
    """A comparison's results: ``table`` (one row per variant and workload,
    the CLI's <scenario>-compare.csv), ``json`` (its -compare.json) and
    ``text`` (the tables it prints)."""

    def __init__(self, json_text: str, csv_text: str, text: str, seed: int):
        self.json_text = json_text
        self.json: Dict[str, Any] = json.loads(json_text)
        self.csv_text = csv_text
        self.table = _frame(csv_text)
        self.text = text
        self.seed = seed
        self.paths: List[str] = []

    def __repr__(self) -> str:
        return f"Comparison({len(self.json.get('variants', []))} variants, seed {self.seed})"


def compare(
    scenario: Scenario,
    sched: Union[None, str, Sequence[str]] = None,
    features: Union[None, Mapping[str, Any], Sequence[str]] = None,
    seed: Optional[int] = None,
    set: Union[None, Mapping[str, Any], Sequence[str]] = None,
    sched_set: Union[None, Mapping[str, Any], Sequence[str]] = None,
    op_timeout: Optional[str] = None,
    machine: Optional[str] = None,
    max_wall: Optional[str] = None,
    out: Union[None, str, "os.PathLike[str]"] = None,
) -> Comparison:
    """Runs ``scenario`` under several schedulers and feature settings, as
    ``schedlab compare`` does, in parallel.

    ``sched`` is a list (or comma-separated string) of schedulers;
    ``features`` maps a feature to its settings, ``{"RUN_TO_PARITY": [True,
    False]}``; the variants are their product. ``max_wall`` bounds each
    variant's wall time; a variant stopped by it is marked partial. With
    ``out``, the CLI's ``<scenario>-compare.csv`` and ``-compare.json`` are
    written there too, byte-identical to ``schedlab compare --out``;
    ``Comparison.paths`` lists them.
    """
    text, file, stem = _load(scenario)
    if sched is not None and not isinstance(sched, str):
        sched = ",".join(sched)
    with _errors(file):
        c = Comparison(*_native.compare(text, file, sched, _features(features), seed, _sets(set), _sched_sets(sched_set), op_timeout, machine, max_wall))
    if out is not None:
        os.makedirs(out, exist_ok=True)
        for suffix, body in (("csv", c.csv_text), ("json", c.json_text)):
            path = os.path.join(os.fspath(out), f"{stem}-compare.{suffix}")
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(body)
            os.replace(tmp, path)
            c.paths.append(path)
    return c


class Sweep:
    """A sweep's results.

    ``runs``: one row per stored run and workload (parameters, seed,
    scheduler, the run's summary); ``aggregate``: the CLI's
    <scenario>-sweep.csv (per point, workload and metric: n, median,
    quartiles, min, max over seeds); ``json``: its -sweep.json; ``report``:
    the table ``schedlab sweep`` prints; ``errors``: runs that failed; ``out``:
    the store directory; ``ran``: runs done this time (the rest were reused).
    """

    def __init__(self, plan: Any, out: str, csv_text: str, json_text: str, report: str, paths: List[str], ran: int, errors: List[Tuple[int, str]]):
        self.out = out
        self.aggregate_csv = csv_text
        self.aggregate = _frame(csv_text)
        self.json_text = json_text
        self.json: Dict[str, Any] = json.loads(json_text)
        self.report = report
        self.paths = paths
        self.ran = ran
        self.errors = [e for _, e in errors]
        self.runs = _runs_frame(plan, out)

    def __repr__(self) -> str:
        return f"Sweep({len(self.runs)} run rows, {len(self.aggregate)} aggregate rows, out={self.out!r})"


def _runs_frame(plan: Any, out: str):
    import pandas as pd

    rows = []
    for i, (key, seed, point) in enumerate(plan.jobs):
        text = plan.stored(out, i)
        if text is None:
            continue
        rec = json.loads(text)
        summary = rec["summary"]
        for w in summary.get("workloads", []):
            row: Dict[str, Any] = {k: v for k, v in point}
            row.update({"seed": seed, "key": key, "scheduler": summary.get("label")})
            row.update({f"{k}" if k != "name" else "workload": v for k, v in w.items() if not isinstance(v, (dict, list))})
            rows.append(row)
    return pd.DataFrame(rows)


def _seeds(seeds: Union[int, str, Iterable[int]]) -> str:
    if isinstance(seeds, str):
        return seeds
    if isinstance(seeds, int):
        return str(seeds)
    return ",".join(str(int(s)) for s in seeds)


def _params(params: Union[None, Mapping[str, Sequence[Any]], Sequence[str]]) -> List[str]:
    if params is None:
        return []
    if isinstance(params, Mapping):
        return [f"{k}=" + ",".join(_toml_value(v) if not isinstance(v, str) else v for v in vals) for k, vals in params.items()]
    return [str(p) for p in params]


def sweep(
    scenario: Scenario,
    seeds: Union[int, str, Iterable[int]] = "1..5",
    params: Union[None, Mapping[str, Sequence[Any]], Sequence[str]] = None,
    out: Union[None, str, "os.PathLike[str]"] = None,
    backend: str = "local",
    set: Union[None, Mapping[str, Any], Sequence[str]] = None,
    features: Union[None, Mapping[str, Any], Sequence[str]] = None,
    sched: Optional[str] = None,
    sched_set: Union[None, Mapping[str, Any], Sequence[str]] = None,
    op_timeout: Optional[str] = None,
    machine: Optional[str] = None,
    jobs: Optional[int] = None,
    address: Optional[str] = None,
    progress: Optional[bool] = None,
    max_wall: Optional[str] = None,
) -> Sweep:
    """Runs a grid of seeds x parameter values, resumably, and aggregates
    over seeds, as ``schedlab sweep`` does.

    ``seeds``: a range or list of ints, or the CLI's ``"1..10"``;
    ``params``: ``{"workload.0.groups": [1, 2, 4]}``, one grid axis each
    (the first varies slowest); ``out``: the store and aggregates directory
    (default ``schedlab-out/<scenario>-sweep``), reused when the sweep runs
    again. ``backend="ray"`` runs each (point, seed) as a Ray task on the
    cluster at ``address`` (a local one by default; needs ``pip install
    schedlab[ray]``); the store and the aggregates are the same as local.
    ``max_wall`` bounds each run's wall time; a run that reaches it fails
    (named in ``errors``, not stored), so a later sweep runs it again.
    ``progress``: a bar of runs done / total with the ETA on stderr, for
    either backend (default: when stderr is a terminal).
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"backend={backend!r}: expected 'local' or 'ray'")
    text, file, stem = _load(scenario)
    out_dir = os.fspath(out) if out is not None else os.path.join("schedlab-out", f"{stem}-sweep")
    args = _plan_args(text, file, _seeds(seeds), _params(params), _sets(set), _features(features), sched, _sched_sets(sched_set), op_timeout, machine, max_wall)
    with _errors(file):
        plan = _native.NativeSweep(**args)
        if backend == "ray":
            from . import ray_sweep

            ran, errors = ray_sweep.run(args, out_dir, address=address, progress=progress)
        else:
            show = sys.stderr.isatty() if progress is None else bool(progress)
            ran, errors = plan.run_local(out_dir, jobs or 0, show)
        csv_text, json_text, report, paths = plan.finish(out_dir, stem, errors, ran)
    return Sweep(plan, out_dir, csv_text, json_text, report, paths, ran, errors)


def _plan_args(text, file, seeds, params, sets, features, sched, sched_sets, op_timeout, machine, max_wall) -> Dict[str, Any]:
    return {
        "text": text,
        "file": file,
        "seeds": seeds,
        "params": params,
        "sets": sets,
        "features": features,
        "sched": sched,
        "sched_sets": sched_sets,
        "op_timeout": op_timeout,
        "machine": machine,
        "max_wall": max_wall,
    }

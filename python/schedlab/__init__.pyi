"""Type stubs of the schedlab Python package (see __init__.py for the docs)."""

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
import pandas as pd

__version__: str

Scenario = Union[str, os.PathLike[str], Mapping[str, Any]]
Overrides = Union[None, Mapping[str, Any], Sequence[str]]

class ScenarioError(ValueError):
    """Bad input: the CLI's one-line message, and its file, line and field."""

    message: str
    file: Optional[str]
    line: Optional[int]
    field: Optional[str]
    def __init__(self, message: str, file: Optional[str] = ..., line: Optional[int] = ..., field: Optional[str] = ...) -> None: ...

class Latency:
    """One workload's wakeup-latency HDR histogram (ns)."""

    name: str
    values: npt.NDArray[np.uint64]
    counts: npt.NDArray[np.uint64]
    percentiles: Dict[float, int]
    @property
    def samples(self) -> int: ...
    def cdf(self) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.float64]]: ...

class Result:
    """One simulation: the CLI's --json as a dict, its --csv tables as DataFrames."""

    json: Dict[str, Any]
    json_text: str
    @property
    def workloads(self) -> pd.DataFrame: ...
    @property
    def tasks(self) -> pd.DataFrame: ...
    @property
    def cpus(self) -> pd.DataFrame: ...
    @property
    def cgroups(self) -> pd.DataFrame: ...
    @property
    def sched_ext(self) -> pd.DataFrame: ...
    def latency(self, workload: str) -> Latency: ...

class Comparison:
    """A comparison: one row per variant and workload."""

    table: pd.DataFrame
    json: Dict[str, Any]
    json_text: str
    csv_text: str
    text: str
    seed: int
    paths: List[str]

class Sweep:
    """A sweep: per-run rows, aggregates over seeds, the store directory."""

    runs: pd.DataFrame
    aggregate: pd.DataFrame
    aggregate_csv: str
    json: Dict[str, Any]
    json_text: str
    report: str
    paths: List[str]
    ran: int
    errors: List[str]
    out: str

def run(
    scenario: Scenario,
    seed: Optional[int] = ...,
    set: Overrides = ...,
    sched: Optional[str] = ...,
    features: Overrides = ...,
    machine: Optional[str] = ...,
    sched_set: Overrides = ...,
    op_timeout: Optional[str] = ...,
    max_wall: Optional[str] = ...,
) -> Result: ...
def compare(
    scenario: Scenario,
    sched: Union[None, str, Sequence[str]] = ...,
    features: Overrides = ...,
    seed: Optional[int] = ...,
    set: Overrides = ...,
    sched_set: Overrides = ...,
    op_timeout: Optional[str] = ...,
    machine: Optional[str] = ...,
    max_wall: Optional[str] = ...,
    out: Union[None, str, os.PathLike[str]] = ...,
) -> Comparison: ...
def sweep(
    scenario: Scenario,
    seeds: Union[int, str, Iterable[int]] = ...,
    params: Union[None, Mapping[str, Sequence[Any]], Sequence[str]] = ...,
    out: Union[None, str, os.PathLike[str]] = ...,
    backend: str = ...,
    set: Overrides = ...,
    features: Overrides = ...,
    sched: Optional[str] = ...,
    sched_set: Overrides = ...,
    op_timeout: Optional[str] = ...,
    machine: Optional[str] = ...,
    jobs: Optional[int] = ...,
    address: Optional[str] = ...,
    progress: Optional[bool] = ...,
    max_wall: Optional[str] = ...,
) -> Sweep: ...

"""Sweeps: local against the CLI, Ray against local, a killed Ray sweep
resumed."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import schedlab

HB = "scenarios/hackbench-threads.toml"
GRID = dict(seeds=range(1, 4), params={"workload.0.groups": [1, 2]}, set={"duration": "100ms", "workload.0.loops": 20})
CLI_GRID = ["--seeds", "1,2,3", "--param", "workload.0.groups=1,2", "--set", 'duration="100ms"', "--set", "workload.0.loops=20"]


def test_local_sweep_is_the_clis(cli, tmp_path):
    s = schedlab.sweep(HB, out=tmp_path / "py", **GRID)
    subprocess.run([cli, "sweep", HB, *CLI_GRID, "--out", str(tmp_path / "cli"), "--quiet"], check=True)
    for name in ("hackbench-threads-sweep.csv", "hackbench-threads-sweep.json"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    assert s.aggregate_csv == (tmp_path / "cli" / "hackbench-threads-sweep.csv").read_text()
    assert s.ran == 6 and not s.errors
    assert sorted(s.runs["seed"].unique()) == [1, 2, 3]
    assert set(s.runs["workload.0.groups"]) == {"1", "2"}
    assert {"median", "min", "max"} <= set(s.aggregate.columns)
    # Again: every run reused, the same aggregates.
    again = schedlab.sweep(HB, out=tmp_path / "py", **GRID)
    assert again.ran == 0 and again.json_text == s.json_text


def test_bad_sweep_input_fails_before_running(tmp_path):
    with pytest.raises(schedlab.ScenarioError, match="seeds"):
        schedlab.sweep(HB, seeds="x..y", out=tmp_path)
    with pytest.raises(schedlab.ScenarioError, match="workload.0.nope"):
        schedlab.sweep(HB, seeds=[1], params={"workload.0.nope": [1]}, out=tmp_path)
    with pytest.raises(ValueError, match="backend"):
        schedlab.sweep(HB, backend="slurm", out=tmp_path)
    assert not (tmp_path / "runs").exists()


def test_ray_backend_without_ray_says_how_to_install_it(tmp_path):
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import schedlab\n"
        f"schedlab.sweep({HB!r}, seeds=[1], out={str(tmp_path)!r}, backend='ray', set={{'duration': '50ms'}})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last == "ImportError: backend='ray' needs Ray: pip install 'schedlab[ray]' (from a checkout: pip install '.[ray]')"


ray = pytest.importorskip("ray") if os.environ.get("SCHEDLAB_REQUIRE_RAY") != "1" else __import__("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_sweep_aggregates_are_the_local_ones(local_ray, tmp_path, cli):
    local = schedlab.sweep(HB, out=tmp_path / "local", **GRID)
    remote = schedlab.sweep(HB, out=tmp_path / "ray", backend="ray", **GRID)
    assert remote.ran == 6 and not remote.errors
    assert remote.aggregate_csv == local.aggregate_csv
    assert remote.json_text == local.json_text
    for name in ("hackbench-threads-sweep.csv", "hackbench-threads-sweep.json"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    # The per-run records are the local store's, byte for byte.
    for f in sorted((tmp_path / "local" / "runs").iterdir()):
        assert (tmp_path / "ray" / "runs" / f.name).read_bytes() == f.read_bytes()
    # The CLI's --ray, on the running cluster, through this Python.
    env = dict(os.environ, SCHEDLAB_PYTHON=sys.executable)
    address = ray.get_runtime_context().gcs_address
    subprocess.run([cli, "sweep", HB, *CLI_GRID, "--out", str(tmp_path / "cli"), "--quiet", "--ray", address], check=True, env=env)
    assert (tmp_path / "cli" / "hackbench-threads-sweep.json").read_bytes() == (tmp_path / "local" / "hackbench-threads-sweep.json").read_bytes()


def test_killed_ray_sweep_resumes(local_ray, tmp_path):
    out = tmp_path / "ray"
    # Runs of 0.2-0.4 s each, so that the kill lands with most of the twelve
    # still to run: the 100 ms runs of GRID take 10 ms, and all twelve could
    # be stored between one look at the store and the kill.
    grid = dict(GRID, seeds=range(1, 7), set={"duration": "5s", "workload.0.loops": 15000})
    # The driver in a process of its own, on the running cluster, killed
    # once some runs are stored.
    code = (
        "import schedlab, sys\n"
        f"schedlab.sweep({HB!r}, out={str(out)!r}, backend='ray', address={ray.get_runtime_context().gcs_address!r}, "
        f"seeds=range(1, 7), params={grid['params']!r}, set={grid['set']!r})\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    runs = out / "runs"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and p.poll() is None:
        if runs.exists() and len(list(runs.glob("*.json"))) >= 2:
            break
        time.sleep(0.01)
    assert p.poll() is None, "the sweep finished before it could be killed"
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    stored = len(list(runs.glob("*.json")))
    assert 2 <= stored < 12
    resumed = schedlab.sweep(HB, out=out, backend="ray", **grid)
    assert resumed.ran == 12 - stored and not resumed.errors
    local = schedlab.sweep(HB, out=tmp_path / "local", **grid)
    assert resumed.json_text == local.json_text and resumed.aggregate_csv == local.aggregate_csv


def test_a_dead_workers_run_is_retried(local_ray, tmp_path, monkeypatch):
    import schedlab.ray_sweep as rs

    marker = tmp_path / "died"
    real = rs.run_job

    def dies_once(args, index):
        # The first task to start kills its worker process outright.
        import os as _os

        try:
            fd = _os.open(str(marker), _os.O_CREAT | _os.O_EXCL)
            _os.close(fd)
            _os._exit(1)
        except FileExistsError:
            pass
        return real(args, index)

    monkeypatch.setattr(rs, "run_job", dies_once)
    s = schedlab.sweep(HB, out=tmp_path / "ray", backend="ray", **GRID)
    assert marker.exists()
    assert s.ran == 6 and not s.errors
    local = schedlab.sweep(HB, out=tmp_path / "local", **GRID)
    assert s.json_text == local.json_text

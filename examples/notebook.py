"""schedlab from Python, as a notebook would use it (runs as a plain script;
CI runs it):

1. compare three schedulers on the cyclictest scenario;
2. sweep a parameter (the background hogs' count) over seeds;
3. plot the latency CDFs with matplotlib into a PNG.

    python examples/notebook.py [OUT_DIR]     # default: schedlab-out/notebook

Run from the repository root (the scenario paths are relative to it).
"""

import os
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt

import schedlab

CYC = "scenarios/cyclictest-normal.toml"
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("schedlab-out", "notebook")
os.makedirs(out, exist_ok=True)
short = {"duration": "1s"}

# %% 1. Three schedulers on cyclictest: EEVDF and two shipped sched_ext
# schedulers (compiled once into the cache, then reused).
scheds = ["eevdf", "simple", "flow"]
c = schedlab.compare(CYC, sched=scheds, set=short, seed=1)
print(c.text)
lat = c.table[c.table["workload"] == "cyclictest"][["variant", "p50_ns", "p99_ns", "max_ns"]]
print(lat.to_string(index=False))
assert list(lat["variant"]) == scheds

# %% 2. Sweep: how the cyclictest tail grows with the background load.
s = schedlab.sweep(CYC, seeds=range(1, 4), params={"workload.1.count": [1, 4, 8]}, set=short, out=os.path.join(out, "sweep"))
print(s.report)
p99 = s.aggregate[(s.aggregate["workload"] == "cyclictest") & (s.aggregate["metric"] == "p99")]
print(p99[["workload.1.count", "median", "min", "max"]].to_string(index=False))

# %% 3. Latency CDFs, one curve per scheduler, from the HDR histograms.
fig, ax = plt.subplots(figsize=(8, 5))
for sched in scheds:
    r = schedlab.run(CYC, sched=sched, set=short, seed=1)
    h = r.latency("cyclictest")
    x, frac = h.cdf()
    ax.step(x / 1000.0, frac, where="post", label=f"{sched} (p99 {h.percentiles[99.0] / 1000:.0f} µs)")
ax.set_xscale("log")
ax.set_xlabel("wakeup latency (µs)")
ax.set_ylabel("fraction of wakeups")
ax.set_title("cyclictest-normal: wakeup latency CDF by scheduler")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
png = os.path.join(out, "latency-cdf.png")
fig.savefig(png, dpi=100)
print(f"wrote {png}")

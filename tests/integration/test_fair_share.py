"""The tuned pool weights act on real contention (issue 15 item 3, docs/tuning.md): two jobs
run at once in two query pools of a FAIR session, and each pool's share of the executor's
task time while both are busy follows the weights that ``gold.apply_pools`` gave the
running session, and moves when a new configuration changes them (no restart).

The session is a child process of its own: FAIR mode is fixed when a SparkContext starts,
and the tests' shared session is FIFO. Its tasks sleep instead of computing, so the share
measured is the scheduler's (task slots), not the operating system's (a loaded 2-core
machine would blur CPU time); ``local[4]`` gives four slots, enough for weights 1:3 to
show."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from lakecep_testing import REPO

pytestmark = [pytest.mark.spark]

SCRIPT = textwrap.dedent("""
    import json, threading, time
    from pyspark.sql import SparkSession
    from lakecep.jobs.gold import apply_pools

    spark = (SparkSession.builder.master("local[4]").appName("lakecep-fair-share")
             .config("spark.scheduler.mode", "FAIR").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    TASKS, NAP = 24, 0.25

    def nap(_):
        start = time.time()
        time.sleep(NAP)
        return (start, time.time())

    sc.parallelize(range(8), 8).map(nap).collect()  # start the Python workers

    def run(pool, out):
        sc.setLocalProperty("spark.scheduler.pool", pool)
        out[pool] = sc.parallelize(range(TASKS), TASKS).map(nap).collect()

    def share(weights):
        changed = apply_pools(spark, {"gold": {"pools": weights}})
        spans = {}
        threads = [threading.Thread(target=run, args=(p, spans)) for p in weights]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # the window where both pools had work: from the later first task to the earlier
        # last one; each pool's task-seconds inside it
        lo = max(min(s for s, _ in v) for v in spans.values())
        hi = min(max(e for _, e in v) for v in spans.values())
        busy = {p: sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in v)
                for p, v in spans.items()}
        total = sum(busy.values())
        return {"changed": changed, "window_s": hi - lo,
                "share": {p: b / total for p, b in busy.items()}}

    result = [share({"q_a": 1, "q_b": 3}), share({"q_a": 3, "q_b": 1})]
    spark.stop()
    print(json.dumps(result))
""")


def test_pool_shares_follow_the_tuned_weights_and_move_with_them() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    # the weights reached the running session's scheduler (pools added, then replaced)
    assert sorted(first["changed"]) == ["q_a weight 1", "q_b weight 3"]
    assert sorted(second["changed"]) == ["q_a weight 3", "q_b weight 1"]
    for run in (first, second):
        assert run["window_s"] > 1.0, run  # both pools really competed
    # weights 1:3 over four slots: 1/4 and 3/4 of the task time while both were busy
    # (slots change hands only when a task ends, so allow some slack), then the reverse
    assert first["share"]["q_b"] > 0.62, first
    assert second["share"]["q_a"] > 0.62, second
    assert first["share"]["q_b"] - second["share"]["q_b"] > 0.3, (first, second)

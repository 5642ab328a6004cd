"""The one timing loop the benchmarks share: alternate the variants, take medians."""

import statistics
import time


def alternating_medians(calls, repeats, warmup=1):
    """Median seconds of each call in `calls` (a dict name -> no-argument function).

    Each is first called `warmup` times (compilation, caches); then the calls run in
    turn, `repeats` rounds, so that drifts in machine load hit every variant alike.
    """
    for call in calls.values():
        for _ in range(warmup):
            call()
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}

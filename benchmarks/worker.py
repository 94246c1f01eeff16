"""One measurement in a fresh process; `bench.py` starts it and reads its last line.

    python benchmarks/worker.py turns SYSTEM SIZES SECONDS MAX_RUNS   # µs per turn, several sizes
    python benchmarks/worker.py memory SYSTEM                          # peak RSS of one 100-turn run
    python benchmarks/worker.py concurrent SYSTEM LOOPS TURNS          # LOOPS runs at once in one event loop
    python benchmarks/worker.py deadline RUNS TIMEOUT_MS               # agentlab's overrun and abort latency

The last line printed is `RESULT {...}` (a Python literal). Only `sys` and
`time` are imported before the system under test, so that the peak memory is
the system's own. Every attempt to reach the network is refused and counted.
"""

import sys
import time

WATCHED = frozenset({"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex"})
network_attempts: list[str] = []


def refuse_network(event: str, args: tuple) -> None:
    if event in WATCHED:
        network_attempts.append(f"{event} {args[1:]!r}"[:200])
        raise OSError(f"the benchmark allows no network: {event}")


sys.addaudithook(refuse_network)


def peak_rss_kib() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def turns(system_name: str, sizes: str, seconds: str, max_runs: str) -> dict:
    """µs per turn of repeated runs at each size: as many runs as fit in SECONDS (at least one)."""
    import asyncio

    from systems import SYSTEMS

    prepare = SYSTEMS[system_name].prepare

    async def measure() -> dict:
        for _ in range(3):  # warm up: imports, schema building, caches
            assert await prepare(10)() == 10
        samples: dict[int, list[float]] = {}
        for size in map(int, sizes.split(",")):
            run, taken, spent = prepare(size), [], 0.0
            while not taken or (spent < float(seconds) and len(taken) < int(max_runs)):
                started = time.perf_counter()
                made = await run()
                elapsed = time.perf_counter() - started
                assert made == size, f"{system_name} made {made} model calls, expected {size}"
                taken.append(elapsed / size * 1e6)
                spent += elapsed
            samples[size] = taken
        return samples

    return {"samples": asyncio.run(measure())}


def memory(system_name: str) -> dict:
    """Import the system and run one 100-turn loop; report the process's peak RSS."""
    import asyncio

    from systems import SYSTEMS

    assert asyncio.run(SYSTEMS[system_name].prepare(100)()) == 100
    return {"peak_rss_kib": peak_rss_kib()}


def concurrent(system_name: str, loops: str, turns_each: str) -> dict:
    """LOOPS runs of TURNS turns each, all at once in one event loop."""
    import asyncio

    from systems import SYSTEMS

    run = SYSTEMS[system_name].prepare(int(turns_each))

    async def all_at_once() -> float:
        assert await run() == int(turns_each)  # warm up
        started = time.perf_counter()
        made = await asyncio.gather(*(run() for _ in range(int(loops))))
        elapsed = time.perf_counter() - started
        assert made == [int(turns_each)] * int(loops)
        return elapsed

    return {"seconds": asyncio.run(all_at_once()), "peak_rss_kib": peak_rss_kib()}


def deadline(runs: str, timeout_ms: str) -> dict:
    """Deadline overrun and abort latency of agentlab, with the raw timer lateness measured alongside."""
    import asyncio

    from deadline import measure_all

    return {"cases": asyncio.run(measure_all(int(runs), float(timeout_ms)))}


COMMANDS = {"turns": turns, "memory": memory, "concurrent": concurrent, "deadline": deadline}

if __name__ == "__main__":
    outcome = COMMANDS[sys.argv[1]](*sys.argv[2:])
    outcome["network_attempts"] = network_attempts
    print("RESULT", repr(outcome))

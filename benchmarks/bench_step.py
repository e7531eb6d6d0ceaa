"""What building a ``Step`` costs ``LoopEngine.make_step``: by keyword, positionally, in C.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_step.py [--rounds 15] [--json FILE]

``make_step`` builds its ``Step`` with positional arguments, the one place in the package that
does (see the comment there), through ``_NEW_STEP``: the C accelerator's ``new_slotted`` where
it is built, which sets the slots without running the dataclass's ``__init__``. This measures
why, per workload (``no_loop``: every call new; ``cycle8``: a cycle of 8 calls), in one
process, the measures alternating round after round: ``make_step`` itself over one run of 100
calls (µs per call), and building the steps it made again, with the values as keyword
arguments, positionally, and positionally through ``_NEW_STEP``. Reported: medians over the
rounds, what keywords would add as a share of ``make_step``, and what ``_NEW_STEP`` saves
against calling ``Step`` positionally, as a share of that call. CPU time (``process_time``);
the steps built every way are checked to be equal to ``make_step``'s.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from _checkout import put_checkout_on_path  # noqa: E402

put_checkout_on_path(os.path.dirname(_HERE))  # after PYTHONPATH: a snapshot given there wins

from _workload import cycle_run, no_loop_run, to_tool_calls  # noqa: E402

CALLS = 100
REPEAT = 20
"""Runs per round and measure (2,000 calls)."""


def _runs(engine: Any, calls: list[Any]) -> tuple[float, list[Any]]:
    """Return (CPU µs per call of make_step over REPEAT runs of ``calls``, the last run's steps)."""
    steps: list[Any] = []
    start = time.process_time_ns()
    for _ in range(REPEAT):
        run = engine.new_run()
        steps = [engine.make_step(run, call) for call in calls]
    return (time.process_time_ns() - start) / 1000 / (REPEAT * len(calls)), steps


def _build(step_type: Any, names: list[str], values: list[tuple[Any, ...]],
           keywords: bool) -> float:
    """Return CPU µs per step of building ``values`` again, by keyword or positionally."""
    if keywords:
        # one call site spelling every keyword, as make_step would
        source = "lambda v: S(" + ", ".join(f"{n}=v[{i}]" for i, n in enumerate(names)) + ")"
    else:
        source = "lambda v: S(" + ", ".join(f"v[{i}]" for i in range(len(names))) + ")"
    make = eval(source, {"S": step_type})  # our own source text, above
    start = time.process_time_ns()
    for _ in range(REPEAT):
        for value in values:
            make(value)
    return (time.process_time_ns() - start) / 1000 / (REPEAT * len(values))


def measure(workload: str, rounds: int) -> dict[str, Any]:
    """Return the medians of the three measures for ``workload``."""
    from otel_loopguard.config import LoopGuardConfig
    from otel_loopguard.detectors._step import Step
    from otel_loopguard.engine import _NEW_STEP, LoopEngine

    calls = to_tool_calls(no_loop_run(CALLS) if workload == "no_loop" else cycle_run(CALLS, 8))
    engine = LoopEngine(LoopGuardConfig())
    _, steps = _runs(engine, calls)  # warm-up
    values = [dataclasses.astuple(step) for step in steps]
    names = [field.name for field in dataclasses.fields(Step)]
    for step, value in zip(steps, values, strict=True):  # both spellings build make_step's step
        assert Step(**dict(zip(names, value, strict=True))) == step == Step(*value) \
            == _NEW_STEP(*value)
    made, keyword, positional, native = [], [], [], []
    for _ in range(rounds):
        made.append(_runs(engine, calls)[0])
        keyword.append(_build(Step, names, values, True))
        positional.append(_build(Step, names, values, False))
        native.append(_build(_NEW_STEP, names, values, False))
    make_us, kw_us, pos_us, new_us = (statistics.median(m)
                                      for m in (made, keyword, positional, native))
    return {"workload": workload, "make_step_us": round(make_us, 2),
            "keyword_build_us": round(kw_us, 2), "positional_build_us": round(pos_us, 2),
            "new_step_build_us": round(new_us, 2),
            "keywords_add_share": round((kw_us - pos_us) / make_us, 3),
            "new_step_saves_share": round((pos_us - new_us) / pos_us, 3), "rounds": rounds}


def main() -> None:
    """Print the figures per workload (and write them as JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    figures = [measure(workload, args.rounds) for workload in ("no_loop", "cycle8")]
    for f in figures:
        print(f"{f['workload']:8}  make_step {f['make_step_us']:6.2f} us/call;  Step built by "
              f"keyword {f['keyword_build_us']:5.2f} us, positionally "
              f"{f['positional_build_us']:5.2f} us, by _NEW_STEP {f['new_step_build_us']:5.2f} "
              f"us;  keywords would add {f['keywords_add_share']:.0%} to make_step, "
              f"_NEW_STEP saves {f['new_step_saves_share']:.0%} of building it")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"python": sys.version.split()[0], "figures": figures}, out, indent=2)


if __name__ == "__main__":
    main()

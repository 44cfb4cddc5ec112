"""``otel-jax report --format html`` on a log of a million ``jax.compile`` lines.

The page must stay within 5 MB and take at most 15 s whatever the log's length: lines are
read one at a time, detail is kept for the longest compiles only and the timeline draws the
longest ones.  This writes a log shaped like otel_jax's own lines (2,000 functions, most
compiles recompiles with a diff, some after warm-up, several ranks, storm warnings among
them), then runs the real command on it a few times and prints time and page size.

    PYTHONPATH=$PWD python benchmarks/report_scale.py [--lines 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

KINDS = ("shape", "dtype", "weak_type", "pytree_structure", "static_argument",
         "function_identity", "sharding")


def write_log(path: str, lines: int) -> None:
    with open(path, "w") as f:
        for i in range(lines):
            fn = f"model.layer_{i % 2000}.apply"
            count = 1 + i // 2000
            kind = "first_compile" if count == 1 else KINDS[i % len(KINDS)]
            seconds = 0.01 + (i * 7919 % 1000) / 1000
            t = i * 0.01
            ev = {
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1.7e9 + t))
                + f".{int((t % 1) * 1e6):06d}Z",
                "level": "info", "event": "jax.compile", "logger": "otel_jax",
                "function": fn, "file": f"/src/model/layer_{i % 50}.py", "line": 10 + i % 90,
                "callsite": f"/src/train_{i % 7}.py:{100 + i % 13}", "count": count,
                "is_recompile": count > 1, "eager_op": False, "after_warmup": count > 20,
                "cause_kind": kind,
                "cause": f"batch['x']: f32[{count},32] -> f32[{count + 1},32]",
                "diff": [] if count == 1 else [
                    {"path": "batch['x']", "kind": kind, "before": f"f32[{count},32]",
                     "after": f"f32[{count + 1},32]"},
                    {"path": "batch['y']", "kind": kind, "before": f"i32[{count}]",
                     "after": f"i32[{count + 1}]"}],
                "diff_total": 0 if count == 1 else 2, "compared_with": count - 1 or None,
                "fingerprint": f"{i:016x}", "program_fingerprint": None,
                "hint": "pad or bucket inputs to a few fixed shapes",
                "compile_s": seconds, "trace_s": seconds / 4, "lower_s": seconds / 4,
                "backend_compile_s": seconds / 2, "device_platform": "cpu",
                "device_kind": "cpu", "device_count": 8, "process_index": i % 8,
                "trace_id": f"{i:032x}", "span_id": f"{i:016x}",
            }
            f.write(json.dumps(ev) + "\n")
            if i % 100_000 == 99_999:
                f.write(json.dumps({"timestamp": ev["timestamp"], "level": "warning",
                                    "event": "jax.recompile_storm", "function": fn,
                                    "recompiles": 8, "threshold": 8}) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from otel_jax import _report

    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "compiles.log")
        t0 = time.perf_counter()
        write_log(log, args.lines)
        print(f"log: {args.lines} lines, {os.path.getsize(log) / 1e6:.0f} MB "
              f"(written in {time.perf_counter() - t0:.1f} s)")
        page = os.path.join(tmp, "report.html")
        # paired with the text report on the same log, alternating which goes first: on a
        # busy machine the ratio says more than either time
        times: dict[str, list[float]] = {"html": [], "table": []}
        for run in range(args.runs):
            order = ("html", "table") if run % 2 == 0 else ("table", "html")
            for fmt in order:
                out = page if fmt == "html" else os.path.join(tmp, "report.txt")
                t0 = time.perf_counter()
                rc = _report.main(["report", "--format", fmt, "-o", out, log])
                times[fmt].append(time.perf_counter() - t0)
                if rc != 0:
                    print(f"otel-jax report exited {rc}", file=sys.stderr)
                    return 1
        size = os.path.getsize(page)
        for fmt, ts in times.items():
            spread = f" (min {min(ts):.1f}, max {max(ts):.1f})" if len(ts) > 1 else ""
            print(f"{fmt} report: {statistics.median(ts):.1f} s median of {len(ts)}{spread}")
        ratios = [h / t for h, t in zip(times["html"], times["table"])]
        print(f"html / table time: {statistics.median(ratios):.2f} (median of paired runs); "
              f"page {size / 1e6:.2f} MB; bounds: 15 s, 5 MB")
        times_html = times["html"]
        ok = statistics.median(times_html) <= 15 and size <= 5_000_000
        print("within bounds" if ok else "OUT OF BOUNDS")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A hung rank during real DDP training: elastic-agent (hang detection) and torchrun, side by side.

Both launchers run the same script, examples/pytorch/train_elastic.py (gloo on CPU), as one
node with --nproc-per-node 2 and one restart allowed. Rank 1 stops beating and blocks before the
all-reduce of step --hang-step (the script's --hang-rank option: once per checkpoint directory);
rank 0 then blocks in that all-reduce. Measured: from the hang (rank 1's "hanging at step" line)
to training again (the next "epoch N begin" line of a restarted worker). elastic-agent runs with
--worker-heartbeat-timeout (the script beats through examples/python/elastic_agent_heartbeat.py,
a no-op under torchrun); torchrun has no hang detection and waits for gloo's own timeout (30 min
by default), so its wait is capped at --cap seconds and reported as "> cap s".

Every output line is timestamped on arrival (monotonic clock). Prints one line per run and a
Markdown table at the end.
"""
import argparse
import os
import re
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
TRAIN = os.path.join(ROOT, "examples/pytorch/train_elastic.py")
HANG = re.compile(r"hanging at step (\d+)")
AGAIN = re.compile(r"epoch \d+ begin")


def run(name, cmd, env, cap, log_path):
    """Start cmd; return seconds from the hang to training again, or None past the cap."""
    t_hang = None
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        buf = b""
        result = None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if t_hang is not None and time.monotonic() > t_hang + cap:
                break
            if not sel.select(timeout=1.0):
                if p.poll() is not None:
                    break
                continue
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            now = time.monotonic()
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace")
                log.write(f"{now:.3f} {line}\n")
                if t_hang is None and HANG.search(line):
                    t_hang = now
                elif t_hang is not None and result is None and AGAIN.search(line):
                    result = now - t_hang
            if result is not None:
                break
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    return t_hang is not None, result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="elastic-agent runs (torchrun: 1)")
    ap.add_argument("--timeout", type=float, default=5.0, help="--worker-heartbeat-timeout")
    ap.add_argument("--cap", type=float, default=180.0, help="seconds to wait for torchrun")
    ap.add_argument("--hang-step", type=int, default=20)
    ap.add_argument("--scenario", choices=["both", "elastic-agent", "torchrun"], default="both")
    ap.add_argument("--out", default=None, help="directory for the logs (default: a temp dir)")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="hang-bench-")
    os.makedirs(out, exist_ok=True)
    agent = os.path.join(ROOT, "build", "elastic-agent")
    env = dict(os.environ, LOGLEVEL="INFO", OMP_NUM_THREADS="1")
    train = ["--epochs", "4", "--samples", "2048", "--step-time", "0.01", "--hang-rank", "1",
             "--hang-step", str(a.hang_step)]
    results = {}
    for launcher in ["elastic-agent", "torchrun"]:
        if a.scenario not in ("both", launcher):
            continue
        times = []
        for i in range(a.runs if launcher == "elastic-agent" else 1):
            ckpt = tempfile.mkdtemp(prefix="ckpt-", dir=out)
            if launcher == "elastic-agent":
                cmd = [agent, "--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
                       "--worker-heartbeat-timeout", str(a.timeout), "--stop-timeout", "2",
                       "--tee", "--", PYTHON, TRAIN, "--ckpt-dir", ckpt] + train
            else:
                cmd = [PYTHON, os.path.join(HERE, "torchrun_launcher.py"), "--standalone",
                       "--nproc_per_node", "2", "--max_restarts", "1", "--tee", "3",
                       TRAIN, "--ckpt-dir", ckpt] + train
            log = os.path.join(out, f"{launcher}-{i}.log")
            hung, t = run(launcher, cmd, env, a.cap, log)
            shown = "no hang seen" if not hung else (f"> {a.cap:.0f} s" if t is None
                                                      else f"{t:.2f} s")
            print(f"{launcher} run {i + 1}: hang -> training again: {shown}  ({log})",
                  flush=True)
            times.append(t if hung else None)
        results[launcher] = times
    print("\n| launcher | hang detection | hang → training again | runs |")
    print("|---|---|---|---|")
    for launcher, times in results.items():
        ok = [t for t in times if t is not None]
        if ok and len(ok) == len(times):
            text = f"{statistics.median(ok):.2f} s median ({min(ok):.2f}–{max(ok):.2f})"
        else:
            text = f"> {a.cap:.0f} s (not recovered)"
        how = (f"--worker-heartbeat-timeout {a.timeout:g}" if launcher == "elastic-agent"
               else "none (gloo timeout: 30 min)")
        print(f"| {launcher} | {how} | {text} | {len(times)} |")


if __name__ == "__main__":
    sys.exit(main())

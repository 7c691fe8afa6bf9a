#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Distributed XGBoost (rabit) under elastic-agent, with no tracker to run by hand.

    elastic-agent --nnodes 2:4 --nproc-per-node 1 --env-style dmlc -- \
        python3 examples/xgboost/train_elastic.py --ckpt-dir /shared/xgb

With `dmlc` in --env-style and no --dmlc-tracker, the agent of group rank 0 serves the rabit
tracker of each round and every worker gets DMLC_TRACKER_URI/PORT, DMLC_TASK_ID (= RANK) and
DMLC_NUM_WORKER. The pattern an elastic run needs:

- rank 0 saves the booster every --save-every iterations to a shared directory (temp + rename);
- every start continues from the last saved booster (xgb_model), because a node may be lost or
  added at any moment and the agent then restarts every worker with a new world size. Rank 0 reads
  it and broadcasts it, so every rank continues from the same iteration;
- each rank trains on its own shard (rows rank, rank + world, ...) of a fixed synthetic data set.

Exit 0 when the model reaches --target accuracy on held-out data, 3 when it does not.
"""
import argparse
import os
import sys
import time

import numpy as np
import xgboost as xgb
from xgboost import collective


def synthetic(seed, rows, features):
    rng = np.random.RandomState(seed)
    x = rng.randn(rows, features)
    w = rng.randn(features)
    y = ((x @ w + np.sin(3 * x[:, 0])) > 0).astype(np.float32)
    return x, y


class SaveEvery(xgb.callback.TrainingCallback):
    """Rank 0 saves the booster every `every` iterations; `step_time` slows each iteration
    (stands for a bigger data set, so that a test can act during training)."""

    def __init__(self, path, every, step_time):
        super().__init__()
        self.path, self.every, self.step_time = path, every, step_time

    def after_iteration(self, model, epoch, evals_log):
        if self.step_time > 0:
            time.sleep(self.step_time)
        done = model.num_boosted_rounds()
        if collective.get_rank() == 0 and done % self.every == 0:
            tmp = self.path + ".tmp.json"
            model.save_model(tmp)
            os.replace(tmp, self.path)
            print(f"saved booster at iteration {done}", flush=True)
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt-dir", required=True)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--save-every", type=int, default=5)
    ap.add_argument("--step-time", type=float, default=0.0)
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--rows", type=int, default=6000)
    args = ap.parse_args()

    rank = int(os.environ["DMLC_TASK_ID"])
    world = int(os.environ["DMLC_NUM_WORKER"])
    os.makedirs(args.ckpt_dir, exist_ok=True)
    path = os.path.join(args.ckpt_dir, "booster.json")
    comm = {k: os.environ[k] for k in ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID")}
    comm["rabit_world_size"] = str(world)  # the tracker refuses a worker of another world
    with collective.CommunicatorContext(**comm):
        assert collective.get_rank() == rank, (collective.get_rank(), rank)
        assert collective.get_world_size() == world
        if "RANK" in os.environ:  # with --env-style torch,dmlc: one rank everywhere
            assert int(os.environ["RANK"]) == rank, (os.environ["RANK"], rank)
        saved = b""  # the root must broadcast something; b"" when nothing is saved yet
        if rank == 0 and os.path.exists(path):
            with open(path, "rb") as f:
                saved = f.read()
        saved = collective.broadcast(saved if rank == 0 else None, 0)
        start = xgb.Booster(model_file=bytearray(saved)) if saved else None
        done = start.num_boosted_rounds() if start else 0
        collective.communicator_print(f"rank {rank} of {world}: continuing from iteration {done}")
        print(f"rank {rank} of {world}: continuing from iteration {done}", flush=True)

        x, y = synthetic(7, args.rows, 10)
        test = args.rows // 5
        dtrain = xgb.DMatrix(x[test:][rank::world], y[test:][rank::world])
        params = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3,
                  "tree_method": "hist", "nthread": 1, "eval_metric": "error"}
        booster = xgb.train(params, dtrain, num_boost_round=max(args.rounds - done, 0),
                            xgb_model=start, evals=[(dtrain, "train")], verbose_eval=10,
                            callbacks=[SaveEvery(path, args.save_every, args.step_time)])
        pred = booster.predict(xgb.DMatrix(x[:test])) > 0.5
        acc = float(np.mean(pred == y[:test]))
        print(f"rank {rank} of {world}: accuracy {acc:.4f} after {booster.num_boosted_rounds()} "
              f"iterations", flush=True)
    return 0 if acc >= args.target else 3


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: Apache-2.0
"""elastic_agent.beat, and the old module name examples/python/elastic_agent_heartbeat.py."""
import importlib.util
import os
import sys
import tempfile
import types
import unittest
from unittest import mock

import elastic_agent
from elastic_agent import heartbeat

HERE = os.path.dirname(os.path.abspath(__file__))
ALIAS = os.path.join(HERE, "..", "..", "examples", "python", "elastic_agent_heartbeat.py")


class Beat(unittest.TestCase):
    def setUp(self):
        self.saved = os.environ.pop("ELASTIC_HEARTBEAT_FILE", None)
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        os.environ.pop("ELASTIC_HEARTBEAT_FILE", None)
        if self.saved is not None:
            os.environ["ELASTIC_HEARTBEAT_FILE"] = self.saved
        self.dir.cleanup()

    def test_no_file_no_op(self):
        self.assertIsNone(elastic_agent.heartbeat_path())
        elastic_agent.beat(3)  # nothing to write, nothing raised

    def test_beat_writes_the_step(self):
        p = os.path.join(self.dir.name, "rank_0")
        os.environ["ELASTIC_HEARTBEAT_FILE"] = p
        elastic_agent.beat(1234)
        with open(p) as f:
            self.assertEqual(f.read(), "1234\n")
        elastic_agent.beat("checkpoint")
        with open(p) as f:
            self.assertEqual(f.read(), "checkpoint\n")
        # a new file (a warm spare's assignment names it): the beat follows
        q = os.path.join(self.dir.name, "rank_1")
        os.environ["ELASTIC_HEARTBEAT_FILE"] = q
        elastic_agent.beat(5)
        with open(q) as f:
            self.assertEqual(f.read(), "5\n")

    def test_compute_time_goes_with_the_next_beat(self):
        p = os.path.join(self.dir.name, "rank_0")
        os.environ["ELASTIC_HEARTBEAT_FILE"] = p
        with elastic_agent.compute():
            sum(range(1000))
        elastic_agent.beat(12)
        with open(p) as f:
            step, secs = f.read().split()
        self.assertEqual(step, "12")
        self.assertGreater(float(secs), 0)
        elastic_agent.beat(13)  # used once: the next beat has no compute time of its own
        with open(p) as f:
            self.assertEqual(f.read(), "13\n")
        elastic_agent.beat(14, compute_s=0.25)
        with open(p) as f:
            self.assertEqual(f.read(), "14 0.250000\n")
        elastic_agent.beat("checkpoint", compute_s=0.25)  # a word carries none
        with open(p) as f:
            self.assertEqual(f.read(), "checkpoint\n")

    def test_compute_without_a_file_is_harmless(self):
        with elastic_agent.compute():
            pass
        elastic_agent.beat(1)

    def test_ddp_block_ends_where_the_all_reduce_begins(self):
        # Under DDP the gradient all-reduce runs inside backward(): a fast rank's backward()
        # returns only when the slowest rank's gradients arrive. The block made for DDP ends at
        # the comm hook (the last bucket handed to the all-reduce), so the wait is not timed.
        # torch is not needed: a stand-in for DDP's register_comm_hook and default hook, and a
        # fake clock.
        clock = [100.0]
        hooks_mod = types.ModuleType("default_hooks")
        hooks_mod.allreduce_hook = lambda pg, bucket: ("allreduce", pg, bucket)

        class Model:
            def register_comm_hook(self, state, hook):
                self.state, self.hook = state, hook

        model = Model()
        p = os.path.join(self.dir.name, "rank_0")
        os.environ["ELASTIC_HEARTBEAT_FILE"] = p
        name = "torch.distributed.algorithms.ddp_comm_hooks.default_hooks"
        with mock.patch.object(heartbeat, "perf_counter", lambda: clock[0]), \
                mock.patch.dict(sys.modules, {name: hooks_mod}):
            timed = elastic_agent.ddp_compute_hook(model)
            self.assertIsNone(model.state)
            with timed:                       # forward from 100.0
                clock[0] = 100.2              # the last bucket ready: 0.2 s of own work
                self.assertEqual(model.hook(None, "bucket"), ("allreduce", None, "bucket"))
                clock[0] = 100.5              # backward() returns after 0.3 s of waiting
            elastic_agent.beat(7)
            with open(p) as f:
                self.assertEqual(f.read(), "7 0.200000\n")
            with timed:                       # a block without a backward: timed to its end
                clock[0] = 100.6
            elastic_agent.beat(8)
            with open(p) as f:
                self.assertEqual(f.read(), "8 0.100000\n")

    def test_old_module_name_is_the_same_function(self):
        spec = importlib.util.spec_from_file_location("elastic_agent_heartbeat", ALIAS)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self.assertIs(mod.beat, heartbeat.beat)
        self.assertIs(mod.path, heartbeat.path)


if __name__ == "__main__":
    unittest.main()

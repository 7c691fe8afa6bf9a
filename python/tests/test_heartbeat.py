# SPDX-License-Identifier: Apache-2.0
"""elastic_agent.beat, and the old module name examples/python/elastic_agent_heartbeat.py."""
import importlib.util
import os
import tempfile
import unittest

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

    def test_old_module_name_is_the_same_function(self):
        spec = importlib.util.spec_from_file_location("elastic_agent_heartbeat", ALIAS)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self.assertIs(mod.beat, heartbeat.beat)
        self.assertIs(mod.path, heartbeat.path)


if __name__ == "__main__":
    unittest.main()

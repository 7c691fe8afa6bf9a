# SPDX-License-Identifier: Apache-2.0
"""elastic_agent.wait_for_assignment against a fake agent: the other end of a socketpair, the
assignment written before the call (the socket holds it), the ready line read after."""
import json
import os
import socket
import unittest

import elastic_agent
from elastic_agent.assign import AssignmentError, wait_for_assignment

KEYS = ("ELASTIC_ASSIGN_FD", "ELASTIC_ASSIGN_LOCAL_RANK", "ELASTIC_GENERATION", "ELASTIC_ROUND", "RANK", "WORLD_SIZE",
        "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "WEIRD", "RAW")


class FakeAgent:
    def __init__(self, line):
        self.agent, worker = socket.socketpair()
        self.fd = worker.detach()
        if line is not None:
            self.agent.sendall(line)
        os.environ["ELASTIC_ASSIGN_FD"] = str(self.fd)

    def ready_line(self):
        self.agent.settimeout(5)
        data = b""
        while not data.endswith(b"\n"):
            chunk = self.agent.recv(4096)
            if not chunk:
                break
            data += chunk
        return data

    def close(self):
        self.agent.close()
        try:
            if self.fd >= 0:
                os.close(self.fd)
        except OSError:
            pass


def line(gen, env, rnd=1, **extra):
    return json.dumps(dict(generation=gen, round=rnd, env=env, **extra)).encode() + b"\n"


class WaitForAssignment(unittest.TestCase):
    def setUp(self):
        self.saved = {k: os.environ.get(k) for k in KEYS}
        for k in KEYS:
            os.environ.pop(k, None)
        self.fakes = []

    def tearDown(self):
        for f in self.fakes:
            f.close()
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def fake(self, data):
        f = FakeAgent(data)
        self.fakes.append(f)
        return f

    def test_cold_start_returns_the_environment(self):
        os.environ.update(RANK="3", WORLD_SIZE="4", ELASTIC_GENERATION="9", MASTER_PORT="1234")
        a = wait_for_assignment()
        self.assertFalse(a["warm"])
        self.assertEqual((a["rank"], a["world_size"], a["generation"], a["master_port"]),
                         (3, 4, 9, 1234))
        self.assertEqual(a["env"]["RANK"], "3")

    def test_warm_spare_takes_its_assignment(self):
        env = {"RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
               "ELASTIC_GENERATION": "17", "ELASTIC_ROUND": "4", "LOCAL_RANK": "0",
               "WEIRD": 'a "quoted"\n\tvalue \\ caf\u00e9'}
        f = self.fake(line(17, env, rnd=4))
        os.environ["ELASTIC_ASSIGN_LOCAL_RANK"] = "0"
        self.assertEqual(elastic_agent.parked_local_rank(), 0)
        a = wait_for_assignment()
        self.assertTrue(a["warm"])
        self.assertEqual((a["rank"], a["world_size"], a["generation"], a["round"]), (2, 3, 17, 4))
        self.assertEqual(a["master_addr"], "10.0.0.1")
        for k, v in env.items():
            self.assertEqual(os.environ[k], v)
        self.assertNotIn("ELASTIC_ASSIGN_FD", os.environ)
        self.assertNotIn("ELASTIC_ASSIGN_LOCAL_RANK", os.environ)
        self.assertEqual(elastic_agent.parked_local_rank(), 0)  # LOCAL_RANK now
        ready = json.loads(f.ready_line())
        self.assertEqual(ready, {"ready": 1, "pid": os.getpid()})
        with self.assertRaises(OSError):
            os.fstat(f.fd)  # closed
        # later calls: what the environment holds
        self.assertEqual(wait_for_assignment()["rank"], 2)

    def test_bytes_that_are_not_utf8_survive(self):
        raw = b'{"generation":3,"env":{"RAW":"\xff\xfe ok"}}\n'
        self.fake(raw)
        wait_for_assignment()
        self.assertEqual(os.environb[b"RAW"], b"\xff\xfe ok")

    def test_generation_not_newer_is_refused(self):
        os.environ["ELASTIC_GENERATION"] = "7"
        self.fake(line(7, {"RANK": "1", "ELASTIC_GENERATION": "7"}))
        with self.assertRaisesRegex(AssignmentError, "not newer than generation 7"):
            wait_for_assignment()
        self.assertNotIn("RANK", os.environ)
        self.fake(line(6, {"RANK": "1"}))
        with self.assertRaisesRegex(AssignmentError, "generation 6: not newer"):
            wait_for_assignment()
        self.fake(line(8, {"RANK": "1", "ELASTIC_GENERATION": "8"}))
        self.assertEqual(wait_for_assignment()["rank"], 1)

    def test_malformed_assignments_are_refused(self):
        bad = [b"hello\n", b"[1]\n", b'{"env":{"A":"1"}}\n', b'{"generation":0,"env":{"A":"1"}}\n',
               b'{"generation":true,"env":{"A":"1"}}\n', b'{"generation":2,"env":{"A":1}}\n',
               b'{"generation":2,"env":{"A=B":"1"}}\n', b'{"generation":2,"env":{}}\n',
               b'{"generation":2,"env":{"A":"1"}}\nmore\n']
        for data in bad:
            with self.subTest(data=data):
                self.fake(data)
                with self.assertRaises(AssignmentError):
                    wait_for_assignment()
                self.assertNotIn("RANK", os.environ)

    def test_agent_gone_before_the_assignment(self):
        f = self.fake(None)
        f.agent.shutdown(socket.SHUT_WR)
        with self.assertRaisesRegex(AssignmentError, "closed ELASTIC_ASSIGN_FD"):
            wait_for_assignment()

    def test_timeout(self):
        self.fake(None)
        with self.assertRaisesRegex(AssignmentError, "no assignment within"):
            wait_for_assignment(timeout=0.05)

    def test_package_exports(self):
        self.assertIs(elastic_agent.wait_for_assignment, wait_for_assignment)
        self.assertTrue(callable(elastic_agent.beat))


if __name__ == "__main__":
    unittest.main()


class Reassignment(WaitForAssignment):
    """--in-place: the socket kept after the first assignment, reassignment() at a safe point."""

    def tearDown(self):
        from elastic_agent import assign
        assign._close()
        assign._buf, assign._env = b"", None
        super().tearDown()

    def inplace(self, gen=5, **env):
        env = {"RANK": "0", "WORLD_SIZE": "2", "ELASTIC_GENERATION": str(gen), "WEIRD": "x", **env}
        f = self.fake(line(gen, env))
        a = wait_for_assignment(inplace=True)
        self.assertEqual(json.loads(f.ready_line()),
                         {"ready": 1, "pid": os.getpid(), "inplace": 1})
        self.assertTrue(elastic_agent.in_place())
        self.assertEqual(a["generation"], gen)
        return f

    def ack(self, f):
        return json.loads(f.ready_line())

    def test_without_inplace_nothing_comes(self):
        self.fake(line(3, {"RANK": "0", "ELASTIC_GENERATION": "3"}))
        wait_for_assignment()
        self.assertFalse(elastic_agent.in_place())
        self.assertIsNone(elastic_agent.reassignment())

    def test_new_assignment_at_a_safe_point_is_taken_and_acked(self):
        f = self.inplace(5)
        self.assertNotIn("ELASTIC_ASSIGN_FD", os.environ)
        self.assertIsNone(elastic_agent.reassignment(), "nothing yet: no blocking")
        f.agent.sendall(line(9, {"RANK": "2", "WORLD_SIZE": "3", "ELASTIC_GENERATION": "9",
                                 "ELASTIC_ROUND": "3"}, rnd=3))
        a = elastic_agent.reassignment(timeout=5)
        self.assertEqual((a["rank"], a["world_size"], a["generation"], a["round"]), (2, 3, 9, 3))
        self.assertNotIn("WEIRD", os.environ, "a variable of the last assignment only is gone")
        self.assertEqual(self.ack(f), {"ack": 9})
        self.assertIsNone(elastic_agent.reassignment())

    def test_generation_not_newer_is_refused_and_the_socket_closed(self):
        f = self.inplace(5)
        f.agent.sendall(line(5, {"RANK": "1", "ELASTIC_GENERATION": "5"}))
        with self.assertRaisesRegex(AssignmentError, "generation 5: not newer than generation 5"):
            elastic_agent.reassignment(timeout=5)
        self.assertEqual(os.environ["RANK"], "0", "nothing of it taken")
        self.assertFalse(elastic_agent.in_place())
        f.agent.settimeout(5)
        self.assertEqual(f.agent.recv(100), b"", "no ack: the agent sees the socket close")

    def test_malformed_or_closed(self):
        f = self.inplace(5)
        f.agent.sendall(b"hello\n")
        with self.assertRaises(AssignmentError):
            elastic_agent.reassignment(timeout=5)
        f.fd = -1  # the helper closed it: its number may be reused below
        f = self.inplace(6)
        f.agent.shutdown(socket.SHUT_WR)
        with self.assertRaisesRegex(AssignmentError, "closed ELASTIC_ASSIGN_FD"):
            elastic_agent.reassignment(timeout=5)

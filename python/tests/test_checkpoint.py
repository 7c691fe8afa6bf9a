# SPDX-License-Identifier: Apache-2.0
"""elastic_agent.checkpoint against a stand-in agent speaking docs/checkpoint.md's protocol on a
real SOCK_SEQPACKET socket (the real agent: tests/unit/test_checkpoint.c, test_e2e_checkpoint)."""
import os
import socket
import tempfile
import threading
import unittest
import zlib

from elastic_agent import checkpoint


class FakeAgent(threading.Thread):
    """Serves one connection: each request is recorded, answered from self.replies (text, or
    (text, fd)); a 'save' gets a fresh memfd of its length, kept for inspection."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.lsock.bind(path)
        self.lsock.listen(1)
        self.requests, self.memfd, self.replies = [], None, []

    def run(self):
        conn, _ = self.lsock.accept()
        with conn:
            while True:
                msg = conn.recv(4096)
                if not msg:
                    return
                words = msg.decode().split(" ")
                self.requests.append(words)
                if words[0] == "save":
                    self.memfd = os.memfd_create("fake")
                    os.ftruncate(self.memfd, int(words[5]))
                    socket.send_fds(conn, [b"ok 42"], [self.memfd])
                elif words[0] == "load":
                    n = os.fstat(self.memfd).st_size
                    socket.send_fds(conn, [b"ok %d -" % n], [self.memfd])
                else:
                    conn.send(self.replies.pop(0).encode())


class Checkpoint(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.saved = {k: os.environ.get(k) for k in
                      (checkpoint.ENV, "TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE")}
        path = os.path.join(self.dir.name, "sock")
        self.agent = FakeAgent(path)
        self.agent.start()
        os.environ.update({checkpoint.ENV: path, "TORCHELASTIC_RUN_ID": "r1", "RANK": "3",
                           "WORLD_SIZE": "4"})
        checkpoint._conn = None

    def tearDown(self):
        if checkpoint._conn:
            checkpoint._conn[1].close()
        checkpoint._conn = None
        self.agent.join(5)
        self.agent.lsock.close()
        if self.agent.memfd is not None:
            os.close(self.agent.memfd)
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self.dir.cleanup()

    def test_save_writes_into_the_memfd_and_commits(self):
        self.agent.replies = ["ok 7 3", "ok 7 3"]
        data = bytes(range(256)) * 100
        checkpoint.save(7, memoryview(data))
        self.assertEqual(self.agent.requests[0], ["save", "r1", "7", "3", "4", str(len(data))])
        self.assertEqual(self.agent.requests[1], ["commit", "42", "-"])
        self.assertEqual(os.pread(self.agent.memfd, len(data) + 1, 0), data)
        checkpoint.save(7, data, shard=0, shards=2, checksum=True)
        self.assertEqual(self.agent.requests[3], ["commit", "42", "%08x" % zlib.crc32(data)])
        self.assertEqual(self.agent.requests[2][3:5], ["0", "2"])

    def test_latest_and_load(self):
        self.agent.replies = ["none", "ok 9 4", "ok 9 3"]
        self.assertIsNone(checkpoint.latest())
        self.assertEqual(checkpoint.latest(), (9, 4))
        checkpoint.save(9, b"state of rank 3")
        view = checkpoint.load(9)
        self.assertEqual(bytes(view), b"state of rank 3")
        self.assertEqual(self.agent.requests[-1], ["load", "r1", "9", "3"])
        self.assertTrue(view.readonly)

    def test_an_error_reply_raises_with_its_code(self):
        self.agent.replies = ["err ENOSPC 10 bytes do not fit --checkpoint-memory"]
        with self.assertRaises(checkpoint.CheckpointError) as cm:
            checkpoint.latest()
        self.assertEqual(cm.exception.code, "ENOSPC")
        self.assertIn("do not fit", str(cm.exception))

    def test_without_the_agent_store(self):
        os.environ.pop(checkpoint.ENV)
        self.assertFalse(checkpoint.available())
        with self.assertRaises(checkpoint.CheckpointError):
            checkpoint.latest()
        os.environ[checkpoint.ENV] = self.agent.lsock.getsockname()
        self.agent.replies = ["none"]
        self.assertIsNone(checkpoint.latest())  # the stand-in's one connection, used and closed


if __name__ == "__main__":
    unittest.main()

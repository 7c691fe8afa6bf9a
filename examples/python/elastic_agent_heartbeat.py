# SPDX-License-Identifier: Apache-2.0
"""Heartbeats for elastic-agent's hang detection: the old module name, kept for scripts that use
it. The helpers are the `elastic_agent` package now (python/elastic_agent/ in the repository,
installed into the system Python by the .deb, `pip install ./python` elsewhere):

    import elastic_agent
    elastic_agent.beat(step)

This module is the same functions: `import elastic_agent_heartbeat as hb; hb.beat(step)`.
"""
import os
import sys

try:
    from elastic_agent.heartbeat import beat, path  # noqa: F401
except ImportError:  # a checkout: ../../python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    from elastic_agent.heartbeat import beat, path  # noqa: F401

__all__ = ["beat", "path"]

"""The sandbox tool server as verifiers runs it (`python -m exactgrade.env.toolset`, a real
process, real MCP calls): a killed worker is replaced on the same port and its sandboxes are
reclaimed; SIGTERM, sent the way verifiers stops a server, leaves nothing of any sandbox, on
both backends."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from sandbox_leftovers import (
    HANG_GUARD,
    alive,
    children,
    held_uids,
    leftovers,
    stop_like_verifiers,
    tool_server,
    wait_for,
)

from exactgrade.sandbox.backends import probe


def call(url: str, tool: str, argument: str, text: str) -> str:
    async def run() -> str:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            reply = await session.call_tool(tool, {argument: text})
            return "".join(part.text for part in reply.content)

    return asyncio.run(run())


@pytest.mark.parametrize("backend", ["namespaces", "landlock"])
def test_a_killed_worker_is_replaced_and_sigterm_leaves_nothing(tmp_path: Path, backend: str) -> None:
    if probe().unavailable(backend):
        pytest.skip(f"{backend}: {probe().unavailable(backend)}")
    port_file = tmp_path / "port"
    env = {**os.environ, "VF_CONFIG": json.dumps({"backend": backend}), "MCP_PORT_FILE": str(port_file),
           "VF_STATE_URL": "", "VF_STATE_SECRET": ""}
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "exactgrade.env.toolset"], env=env,
                                  start_new_session=True, stdout=subprocess.DEVNULL, stderr=log)
    try:
        port = wait_for(lambda: port_file.exists() and port_file.read_text(), "the port file")
        url = f"http://127.0.0.1:{port}/mcp"
        assert call(url, "execute_code", "code", "result = 6 * 7\nprint(result)").strip() == "42"
        supervisor, first = wait_for(lambda: tool_server(os.getpid()), "the worker")
        first_uids, first_zygotes = held_uids(first), children(first)
        assert len(first_uids) == 1 and first_zygotes, (first_uids, first_zygotes)

        os.kill(first, signal.SIGKILL)  # a crash: the worker and its sandbox are gone at once
        _, second = wait_for(lambda: (found := tool_server(os.getpid())) and found[1] != first and found,
                             "a new worker")
        assert alive(supervisor) and not alive(first)
        assert leftovers(first_uids) == {}
        wait_for(lambda: not any(alive(z) for z in first_zygotes), "the zygote to exit (EOF)")
        # Same port, fresh sandbox: the variables of the lost one are gone (a rollout that had
        # one is flagged by the tool server, see test_env.py).
        assert call(url, "execute_code", "code", "print(globals().get('result'))").strip() == "None"
        assert call(url, "bash", "command", "echo $((6 * 7))").strip() == "42"
        second_uids, second_zygotes = held_uids(second), children(second)
        assert len(second_uids) == 1 and second_zygotes

        code = stop_like_verifiers(server.pid, grace=HANG_GUARD)  # stopping, not its speed, is tested
        assert code == 0, "the server did not stop by itself after SIGTERM"
        assert leftovers(second_uids) == {}
        assert not alive(second)
        wait_for(lambda: not any(alive(z) for z in second_zygotes), "the zygote to exit (EOF)")
        log = log_path.read_text()
        assert f"worker died (killed by SIGKILL); reclaimed the sandboxes of uids {sorted(first_uids)}" in log
        assert f"stopped; reclaimed the sandboxes of uids {sorted(second_uids)}" in log
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()

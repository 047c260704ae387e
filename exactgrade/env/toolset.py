"""The shared sandbox tool server: `execute_code(code)` and `bash(command)`.

One server per eval (a taskset-scoped `vf.SharedToolsetConfig` toolset), launched by
verifiers as `python -m exactgrade.env.toolset`. It keeps one exactgrade Sandbox per
rollout, keyed by the rollout's state route (which verifiers signs into every call), so
`result` persists across turns while the ~4 s `import verifiers.v1` of a tool server is
paid once per eval instead of once per rollout. Model code runs only in the Sandbox,
never in this process (which holds the state-channel secret).

The sandbox is built on the first call from the rollout state (inputs as wire text and
the profile, written there by the host), in parallel with other rollouts' (the zygote of the
taskset's profile is started with the server, so the first calls do not queue behind it);
after every call the sandbox's `result` is pushed back into the state as wire text. A sandbox
is closed once its rollout is over (its state route stops answering; a sandbox is checked once
idle for REAP_INTERVAL, then at growing intervals while its rollout goes on).

The process verifiers launches is a thin supervisor (`exactgrade.env.supervise`): a forked
worker serves the tools and owns the sandboxes; when the server is stopped, or the worker dies,
the supervisor reclaims every sandbox the worker held and, unless stopped, forks a new worker.
A rollout whose sandbox was lost that way is flagged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs

import verifiers.v1 as vf
from verifiers.v1.mcp.server import _call_state, _channel_request

from exactgrade.env.state import SandboxState

REAP_INTERVAL = 2.0
"""Seconds a sandbox is idle before the first check that its rollout is over."""
MAX_CHECK_INTERVAL = 16.0
"""Checks of a rollout still going on back off up to this many seconds apart."""
MAX_CALLS = 64
"""Sandbox calls one server runs at once (each holds a thread while it waits on its sandbox)."""
MAX_IDLE = 3600.0
"""A sandbox untouched this long is closed even if its rollout still answers."""


class SandboxToolsetConfig(vf.SharedToolsetConfig):
    """Where the shared tool server runs (`runtime`) or an external one (`url`), and the
    sandbox backend (`auto`: namespaces where the host allows them, else landlock)."""

    backend: Literal["auto", "namespaces", "landlock"] = "auto"
    warm_profile: Literal["python", "torch"] | None = None
    """The sandbox profile whose zygote the server starts at once (the taskset sets its own)."""


@dataclass
class _Session:
    """One rollout's sandbox and the state coordinates that tell when the rollout is over."""

    sandbox: Any
    channel: tuple[str | None, str, str | None]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    check_every: float = REAP_INTERVAL
    """Idle seconds before the next check that the rollout is over (doubles while it goes on)."""


class SandboxToolset(vf.Toolset[SandboxToolsetConfig, SandboxState]):
    TOOL_PREFIX = None  # the model sees the bare names `execute_code` and `bash`

    def __init__(self, config: SandboxToolsetConfig) -> None:
        super().__init__(config)
        self._sessions: dict[str, _Session] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        # Sandbox calls block (up to the sandbox's own timeout): give every rollout a thread.
        self._pool = ThreadPoolExecutor(max_workers=MAX_CALLS, thread_name_prefix="sandbox")
        # Closing waits for the sandbox's processes to die: never in the threads calls need.
        self._closer = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sandbox-close")
        self._reaper: asyncio.Task | None = None

    async def setup(self) -> None:
        self._reaper = asyncio.create_task(self._reap_finished_rollouts())
        self._exit_stack.push_async_callback(self.close)
        if self.config.warm_profile is not None:  # a failure here shows again at the first call
            self._pool.submit(_warm, self.config.warm_profile, self.config.backend)

    @vf.tool
    async def execute_code(self, code: str) -> str:
        """Run Python code in the task's sandbox: a persistent interpreter in which the task's
        inputs are preloaded as variables and every variable, including `result`, survives
        across calls. Returns the captured stdout and stderr."""
        return await self._call("execute_code", code)

    @vf.tool
    async def bash(self, command: str) -> str:
        """Run a shell command inside the same sandbox (no network; files written in the
        working directory persist across calls). Returns the combined stdout and stderr."""
        return await self._call("bash", command)

    async def call_for(self, state: SandboxState, tool: str, text: str) -> str:
        """Call a tool in this process for the rollout whose state is `state` (a served call
        pulls the state from the host instead); what the call leaves is written into `state`."""
        token = _call_state.set(state)
        try:
            return await getattr(self, tool)(text)
        finally:
            _call_state.reset(token)

    async def _call(self, method: str, text: str) -> str:
        from exactgrade.sandbox import SandboxDied

        state: SandboxState = self.state
        state.tool_calls += 1
        if state.sandbox_error is not None or state.model_fault is not None:
            return f"error: the sandbox is gone ({state.sandbox_error or state.model_fault})"
        started = time.monotonic()
        try:
            session = await self._session_for(state)
        except SandboxLost as e:
            state.sandbox_error = str(e)
            return f"error: {e}"
        except Exception as e:  # noqa: BLE001 - any failure to build the sandbox is a harness failure
            state.sandbox_error = f"sandbox could not start: {type(e).__name__}: {e}"
            state.sandbox_seconds += time.monotonic() - started
            return f"error: {state.sandbox_error}"
        async with session.lock:
            session.last_used = time.monotonic()
            try:
                output = await self._run(getattr(session.sandbox, method), text)
                state.result_wire, state.result_error = await self._run(read_result, session.sandbox)
            except SandboxDied as e:
                if e.by_model:
                    state.model_fault = f"the model's code ended its sandbox: {e} ({e.death.evidence})"
                else:
                    state.sandbox_error = f"sandbox died: {e} ({e.death.evidence})"
                output = f"error: the sandbox died ({e})"
            except ReadBackRefused as e:  # only model code in the worker can send what decode refuses
                state.model_fault = f"read-back refused: {e}"
                output = f"error: `result` could not be read back ({e})"
            except Exception as e:  # noqa: BLE001 - anything else from the sandbox also fails closed
                state.sandbox_error = f"sandbox failed: {type(e).__name__}: {e}"
                output = f"error: the sandbox failed ({type(e).__name__})"
            finally:
                state.sandbox_seconds += time.monotonic() - started
                session.last_used, session.check_every = time.monotonic(), REAP_INTERVAL
        return output

    async def _run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _session_for(self, state: SandboxState) -> _Session:
        channel = self._state_channel()
        key = channel[2] or "rollout"  # the signed route is the rollout's trace id
        session = self._sessions.get(key)
        if session is not None:
            return session
        if state.sandbox_uid is not None:  # a fresh sandbox would silently drop its variables
            raise SandboxLost(f"this rollout's sandbox (uid {state.sandbox_uid}) was lost: the tool "
                              "server's worker restarted or closed it")
        async with self._opening.setdefault(key, asyncio.Lock()):
            session = self._sessions.get(key)
            if session is None:
                sandbox = await self._run(open_sandbox, state.inputs_wire, state.profile, self.config.backend)
                session = self._sessions[key] = _Session(sandbox, channel)
        self._opening.pop(key, None)
        state.sandbox_uid = session.sandbox.uid
        return session

    async def _reap_finished_rollouts(self) -> None:
        """Close the sandboxes of rollouts whose state route no longer answers."""
        while True:
            await asyncio.sleep(REAP_INTERVAL / 2)
            now = time.monotonic()
            due = [(key, session) for key, session in list(self._sessions.items())
                   if not session.lock.locked() and now - session.last_used >= session.check_every]
            await asyncio.gather(*(self._reap_if_over(key, session) for key, session in due))

    async def _reap_if_over(self, key: str, session: _Session) -> None:
        import httpx

        url, secret, route = session.channel
        over = time.monotonic() - session.last_used > MAX_IDLE
        if url and not over:
            try:
                await asyncio.wait_for(
                    _channel_request("GET", url, secret, route=route, client=self._state_client), 10
                )
            except httpx.HTTPStatusError as e:
                over = e.response.status_code < 500
            except Exception:  # noqa: BLE001 - unreachable now; retry at the next sweep
                pass
        if over:
            await self._close(key)
        else:
            session.check_every = min(2 * session.check_every, MAX_CHECK_INTERVAL)

    async def _close(self, key: str) -> None:
        session = self._sessions.pop(key, None)
        if session is not None:
            async with session.lock:
                with contextlib.suppress(Exception):
                    await asyncio.get_running_loop().run_in_executor(self._closer, session.sandbox.close)

    async def close(self) -> None:
        """Close every sandbox this server holds."""
        if self._reaper is not None:
            self._reaper.cancel()
        await asyncio.gather(*(self._close(key) for key in list(self._sessions)))
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._closer.shutdown(wait=False, cancel_futures=True)

    def serve_on(self, sock: socket.socket) -> None:
        """verifiers' `ServerBase._serve`, on the supervisor's listening socket instead of one
        of its own (a shared server has no task channel, so no `setup_task`)."""
        import httpx
        import uvicorn
        from mcp.server.mcpserver import MCPServer
        from mcp.server.transport_security import TransportSecuritySettings
        from verifiers import __version__
        from verifiers.v1.mcp.server import STATE_TIMEOUT, _request_query_params

        # httpx logs every state pull and push at INFO (~10% of this process's CPU at -c 64)
        logging.getLogger("httpx").setLevel(logging.WARNING)

        async def serve() -> None:
            async with self._exit_stack, httpx.AsyncClient(timeout=STATE_TIMEOUT) as client:
                self._state_client = client
                await self.setup()
                mcp = MCPServer(self.server_name or type(self).__name__, version=__version__)
                self.register(mcp)
                mcp_app = mcp.streamable_http_app(json_response=True, stateless_http=True,
                                                  transport_security=TransportSecuritySettings(
                                                      enable_dns_rebinding_protection=False))

                async def app(scope, receive, send) -> None:
                    query = (parse_qs(scope.get("query_string", b"").decode(), keep_blank_values=True)
                             if scope["type"] == "http" else None)
                    token = _request_query_params.set(query)
                    try:
                        await mcp_app(scope, receive, send)
                    finally:
                        _request_query_params.reset(token)

                await uvicorn.Server(uvicorn.Config(app, log_level="critical")).serve(sockets=[sock])

        asyncio.run(serve())


class ReadBackRefused(Exception):
    """The sandbox's reply for `result` does not decode on the host: a forged read-back."""


class SandboxLost(Exception):
    """The rollout had a sandbox that no longer exists (its worker died or it was closed)."""


def _warm(profile: str, backend: str) -> None:
    from exactgrade.sandbox import warm

    with contextlib.suppress(Exception):
        warm(profile, backend)


def open_sandbox(inputs_wire: str, profile: str, backend: str = "auto"):
    """A sandbox preloaded with a task's inputs (wire text of a dict)."""
    from exactgrade import wire
    from exactgrade.sandbox import Sandbox

    inputs = wire.decode(inputs_wire) if inputs_wire else {}
    if not isinstance(inputs, dict):
        raise ValueError(f"task inputs must decode to a dict, got {type(inputs).__name__}")
    return Sandbox(inputs=inputs, profile=profile, backend=backend)


def read_result(sandbox) -> tuple[str | None, str | None]:
    """(the sandbox's `result` as wire text, None) once set; (None, why) when the sandbox
    reports that `result` is not a wire value (a wrong answer, not a harness failure);
    (None, None) while it was never set. A reply the host decoder refuses is ReadBackRefused (the
    sandbox's encoder never sends one: model code forged it); SandboxDied passes through; any other
    failure here is the host's own (the caller records a harness failure)."""
    from exactgrade import wire
    from exactgrade.sandbox import NoResult, ResultNotEncodable, SandboxDied

    try:
        value = sandbox.result()
    except NoResult:
        return None, None
    except SandboxDied:
        raise
    except ResultNotEncodable as e:
        return None, str(e)
    except wire.WireError as e:
        raise ReadBackRefused(f"WireError: {e}") from e
    return wire.encode(value), None


def main() -> None:
    """`python -m exactgrade.env.toolset`, as verifiers launches it: the supervisor."""
    from exactgrade.env.supervise import listen, supervise

    config_cls = SandboxToolset._config_cls()
    if "VF_CONFIG" in os.environ:
        config = config_cls.model_validate_json(os.environ["VF_CONFIG"])
    else:
        from pydantic_config import cli

        config = cli(config_cls)
    supervise(SandboxToolset(config).serve_on, listen())


if __name__ == "__main__":
    main()

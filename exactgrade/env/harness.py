"""The default harness: verifiers' own chat loop with no local tools, run inside vf-eval.

The stock `null`/`bash` harnesses run their chat program as a fresh process per rollout,
prepared with `uv sync --script` (needs PyPI or a wheelhouse on every start) and paying
~1.5 s of imports each time. On the subprocess runtime that program would run on this very
host anyway, so this harness executes the same bundled program text (verifiers'
`CHAT_PROGRAM_SOURCE`, whose dependencies are verifiers' own) in this process: no uv, no
network, no per-rollout interpreter. It offers the model no local tools: its only tools are
the MCP ones (`execute_code`, `bash` of the sandbox tool server). On any other runtime
(docker, prime, ...) it is exactly the stock `null` harness.

The program builds two HTTP clients per rollout (the model's and the MCP one), and each new
client loads a CA bundle into a fresh TLS context: ~45 ms of CPU each, the largest single cost
of a rollout in vf-eval at -c 64. In this process both get one TLS context per CA bundle, built
once (the same bundle and defaults the program asks for).
"""

from __future__ import annotations

import argparse
import json
import ssl
import traceback
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from functools import cache
from types import CodeType

import verifiers.v1 as vf
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM_SOURCE
from verifiers.v1.runtimes import ProgramResult


@cache
def _chat_program() -> CodeType:
    return compile(CHAT_PROGRAM_SOURCE, "<verifiers chat program>", "exec")


@cache
def _tls_context(cafile: str | None = None) -> ssl.SSLContext:
    """One verifying TLS context per CA bundle (None: certifi's, as httpx's default), shared by
    every client of every rollout in this process (an SSLContext is safe to share)."""
    import certifi

    return ssl.create_default_context(cafile=cafile or certifi.where())


def _model_http_client(namespace: dict):
    """The program's `DefaultAsyncHttpxClient(verify=...)`, with the shared TLS context."""
    default = namespace["DefaultAsyncHttpxClient"]

    def client(*args, verify=True, **kwargs):
        if verify is True or isinstance(verify, str):
            verify = _tls_context(verify if isinstance(verify, str) else None)
        return default(*args, verify=verify, **kwargs)

    return client


def _mcp_client(namespace: dict):
    """The program's `mcp_client(spec)` (the same httpx2 client as mcp's create_mcp_http_client:
    redirects followed, the program's timeouts and headers), with the shared TLS context."""

    @asynccontextmanager
    async def mcp_client(spec: dict):
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        stack = AsyncExitStack()
        try:
            timeout = httpx2.Timeout(spec.get("timeout", namespace["MCP_TIMEOUT"]),
                                     connect=spec.get("connect_timeout", 5.0))
            http_client = await stack.enter_async_context(httpx2.AsyncClient(
                follow_redirects=True, timeout=timeout, headers=spec.get("headers") or None,
                verify=_tls_context()))
            yield await stack.enter_async_context(Client(streamable_http_client(spec["url"],
                                                                                http_client=http_client)))
        finally:  # like the program: closing noise must not fail a call whose result is in
            with suppress(Exception):
                await stack.aclose()

    return mcp_client


class ExactgradeHarness(NullHarness):
    """`null` harness whose chat loop runs in-process on the subprocess runtime."""

    async def setup(self, runtime: vf.Runtime) -> None:
        if runtime.type != "subprocess":
            await super().setup(runtime)

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data,
                     tool_interception_url=None) -> ProgramResult:
        if runtime.type != "subprocess":
            return await super().launch(ctx, trace, runtime, endpoint, secret, mcp_urls, data,
                                        tool_interception_url)
        system_prompt, prompt = self.resolve_prompt(data)
        if not isinstance(prompt, str | None):
            raise ValueError("the exactgrade harness takes a string prompt")
        args = argparse.Namespace(
            base_url=endpoint, api_key=secret, model=ctx.model,
            system_prompt=system_prompt or "", prompt=prompt or "", initial_messages_file="",
            mcp_config=json.dumps({"mcpServers": {
                name: {"url": url, "timeout": self.config.tool_timeout} for name, url in mcp_urls.items()
            }}) if mcp_urls else "",
            tool_interception_url=tool_interception_url or "", bash=False, compaction=False,
            summarize_at_tokens=None, edit=False, search=False, serper_key="",
        )  # fmt: skip
        # A fresh module namespace per rollout: the program reads its arguments from
        # parse_args(), which each rollout replaces with its own.
        namespace: dict = {"__name__": "exactgrade_chat_program"}
        exec(_chat_program(), namespace)  # verifiers' own trusted program text, not model output
        namespace["parse_args"] = lambda: args
        namespace["DefaultAsyncHttpxClient"] = _model_http_client(namespace)
        namespace["mcp_client"] = _mcp_client(namespace)
        # The program never closes its model client (its process exits); here the process
        # lives on, so keep hold of the clients it opens and close them after the rollout.
        clients = []

        class ClosableAsyncOpenAI(namespace["AsyncOpenAI"]):
            def __init__(self, *a, **k) -> None:
                super().__init__(*a, **k)
                clients.append(self)

        namespace["AsyncOpenAI"] = ClosableAsyncOpenAI
        try:
            await namespace["main"]()
        except SystemExit as e:  # the program exits 97 on a model transport failure
            code = e.code if isinstance(e.code, int) else 1
            return ProgramResult(code, "", traceback.format_exc())
        except Exception:  # noqa: BLE001 - reported like the stock program's non-zero exit
            return ProgramResult(1, "", traceback.format_exc())
        finally:
            for client in clients:
                await client.close()
        return ProgramResult(0, "", "")

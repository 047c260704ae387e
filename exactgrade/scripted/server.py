"""`python -m exactgrade policy-server`: a scripted OpenAI-compatible chat-completions server.

Serves POST /v1/chat/completions (SSE streaming and plain JSON, with tool calls), GET
/v1/models and GET /stats on 127.0.0.1. The "model" identifies the task from the prompt
text, then plays its policy's script (exactgrade.scripted.policies): one tool call per
turn, then a short final message. It also watches every tool output it is sent for the
host canary or answer-key text and reports such escapes in /stats and the log.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from exactgrade.cli_args import port, small_text_file, writable_file
from exactgrade.scripted.policies import POLICIES

HELP = ("Run the scripted policy server (reference, mutant, adversarial, partial or rotate) that the demo "
        "evaluates.")

MAX_BODY = 64 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", choices=POLICIES, default="reference",
                        help="which scripted policy answers (default: reference; partial: the reference on "
                             "some families and levels only, for calibrate; rotate: a task's rollouts take "
                             "turns, reference, mutant, adversarial)")
    parser.add_argument("--port", type=port, default=0, help="port on 127.0.0.1 (default 0: any free port; "
                        "the URL is printed on the first stdout line)")
    parser.add_argument("--log", type=writable_file, default=None,
                        help="append one JSON line per request here")
    parser.add_argument("--canary-file", type=small_text_file, default=None,
                        help="host file holding the escape canary token (adversarial probes try to read it)")


@dataclass(frozen=True)
class CatalogEntry:
    task_id: str
    index: int
    prompt: str
    program: str
    policy: Any
    inputs: Any = None
    """The task's inputs (a text-mode prompt lists tensor values, so the entry is found by them)."""


def load_catalog() -> list[CatalogEntry]:
    """Every registered task's prompt and reference program (host-side; no answer keys)."""
    from exactgrade.task import DOMAINS, task_defs

    entries = []
    for domain in DOMAINS:
        try:
            definitions = task_defs(domain)
        except (ImportError, AttributeError):  # a domain not written yet
            continue
        for index, d in enumerate(definitions):
            prompt = d.render(d.inputs).strip()
            entries.append(CatalogEntry(d.id, index, prompt, d.program, d.policy, d.inputs))
    return entries


GENERATED_ID_LINE = re.compile(r"^Task id: (\S+)$", re.MULTILINE)


def find_task(catalog: list[CatalogEntry], user_text: str) -> CatalogEntry | None:
    """The generated task its `Task id:` line names (rebuilt from the id: no catalogue of generated
    tasks exists or is needed), else the canonical task whose prompt the text holds (in any answer
    mode: another mode's prompt is the tools prompt rewritten). The id line comes first: a generated
    level-1 task can hold a canonical task's very question."""
    for task_id in GENERATED_ID_LINE.findall(user_text):
        entry = generated_entry(task_id)
        if entry is not None:
            return entry
    matches = [entry for entry in catalog if entry.prompt and entry.prompt in user_text]
    for mode in ("code", "text"):
        matches = matches or [e for e in catalog if e.prompt and _in_mode(e, mode) in user_text]
    return max(matches, key=lambda entry: len(entry.prompt)) if matches else None


def _in_mode(entry: CatalogEntry, mode: str) -> str:
    from exactgrade.env import modes

    text = modes.rewrite(entry.prompt, mode)
    return modes.text_inputs(text, entry.inputs or {}) if mode == "text" else text


SOLVE_SIGNATURE = re.compile(r"def solve\(([^)]*)\):")


def answer_mode(body: dict) -> tuple[str, tuple[str, ...]]:
    """(the answer mode a request is in, the input names of `solve` in code mode), from what the
    environment sent: tools offered, or a system prompt asking for a python block or a json one."""
    if body.get("tools"):
        return "tools", ()
    messages = body.get("messages") or []
    system = "\n".join(text_of(m.get("content")) for m in messages if m.get("role") == "system")
    signature = SOLVE_SIGNATURE.search(system)
    if signature:
        return "code", tuple(name.strip() for name in signature.group(1).split(",") if name.strip())
    return ("text" if "```json" in system else "tools"), ()


def generated_entry(task_id: str) -> CatalogEntry | None:
    """A generated task as a catalogue entry."""
    from exactgrade.family import parse_generated_id
    from exactgrade.lookup import get_task
    from exactgrade.scripted.policies import script_index
    from exactgrade.task import UnknownTask

    if parse_generated_id(task_id) is None:
        return None
    try:
        task = get_task(task_id)
    except (UnknownTask, ValueError):
        return None
    return CatalogEntry(task.id, script_index(task.id), task.prompt.strip(), task.program, task.policy,
                        task.inputs)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class PolicyModel:
    """The scripted model: which message to send next, given the conversation so far."""

    def __init__(self, policy: str, catalog: list[CatalogEntry], canary: str, canary_file: str,
                 port: int, log: Path | None) -> None:
        self.policy, self.catalog, self.canary = policy, catalog, canary
        self.canary_file, self.port, self.log = canary_file, port, log
        self.lock = threading.Lock()
        self.requests = 0
        self.unknown = 0
        self.escapes: list[dict[str, str]] = []
        self._seen_tool_ids: set[str] = set()
        self._turns: dict[str, int] = {}
        """rotate: rollouts begun per task."""
        self._rollouts: dict[str, str] = {}
        """The first tool call id of each tools-mode rollout -> what it plays (a later turn finds it)."""

    def plays(self, entry: CatalogEntry, messages: list) -> str:
        """What the policy plays in this rollout: reference, mutant or adversarial (partial: the
        reference on the tasks it solves, the mutant on the others; rotate: the next of ROTATION for
        the task at a rollout's first request, then what that rollout began with)."""
        from exactgrade.scripted.policies import ROTATION, partial_solves

        if self.policy == "partial":
            return "reference" if partial_solves(entry.task_id) else "mutant"
        if self.policy != "rotate":
            return self.policy
        calls = [call.get("id") for m in messages if m.get("role") == "assistant"
                 for call in m.get("tool_calls") or () if isinstance(call, dict)]
        with self.lock:
            if calls and calls[0] in self._rollouts:
                return self._rollouts[calls[0]]
            turn = self._turns.get(entry.task_id, 0)
            self._turns[entry.task_id] = turn + 1
            return ROTATION[turn % len(ROTATION)]

    def script(self, entry: CatalogEntry, plays: str):
        from exactgrade.scripted import policies

        if plays == "reference":
            return policies.reference_script(entry.program)
        if plays == "mutant":
            return policies.mutant_script(entry.program, entry.index, entry.policy)
        return policies.adversarial_script(entry.program, entry.index, self.canary_file, self.port)

    def one_reply(self, entry: CatalogEntry, mode: str, names: tuple[str, ...], plays: str):
        """The whole answer of a one-turn mode (code: a python block defining solve; text: the answer
        written out, which the scripted policy takes from the task's key)."""
        from exactgrade.scripted import policies, text_replies

        if mode == "text":
            from exactgrade.lookup import get_task

            expected = get_task(entry.task_id).expected
            if plays == "reference":
                return text_replies.reference_text(expected)
            if plays == "mutant":
                return text_replies.mutant_text(expected, entry.index)
            return text_replies.text_attack_reply(expected, entry.index)
        if plays == "reference":
            return policies.reference_reply(entry.program, names)
        if plays == "mutant":
            return policies.mutant_reply(entry.program, names, entry.index, entry.policy)
        return policies.code_attack_reply(entry.program, names, entry.index, self.canary_file, self.port)

    def reply(self, body: dict) -> tuple[dict, str]:
        from exactgrade.scripted.policies import escaped

        messages = body.get("messages") or []
        user_text = "\n".join(text_of(m.get("content")) for m in messages if m.get("role") == "user")
        entry = find_task(self.catalog, user_text)
        tool_messages = [m for m in messages if m.get("role") == "tool"]
        with self.lock:
            self.requests += 1
            for m in tool_messages:
                call_id = str(m.get("tool_call_id"))
                why = escaped(text_of(m.get("content")), self.canary)
                if why and call_id not in self._seen_tool_ids:
                    self.escapes.append({"task_id": entry.task_id if entry else "?", "why": why})
                self._seen_tool_ids.add(call_id)
            if entry is None:
                self.unknown += 1
        if entry is None:
            return {"role": "assistant", "content": "I cannot identify this task."}, "stop"
        mode, names = answer_mode(body)
        plays = self.plays(entry, messages)
        if mode != "tools":
            reply = self.one_reply(entry, mode, names, plays)
            said = f"Policy: {plays} ({reply.kind}).\n\n" if self.policy == "rotate" else ""
            return {"role": "assistant", "content": said + reply.text}, "stop"
        script = self.script(entry, plays)
        offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        if len(tool_messages) < len(script.steps):
            step = script.steps[len(tool_messages)]
            if step.tool not in offered:
                return {"role": "assistant", "content": f"tool {step.tool!r} is not offered"}, "stop"
            call = {"id": f"call_{uuid.uuid4().hex[:16]}", "type": "function",
                    "function": {"name": step.tool, "arguments": json.dumps(step.arguments)}}
            if self.policy == "rotate":
                with self.lock:
                    self._rollouts.setdefault(call["id"], plays)
            return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        said = plays if self.policy == "rotate" else self.policy
        return {"role": "assistant", "content": f"Done ({said}: {script.kind})."}, "stop"

    def stats(self) -> dict:
        with self.lock:
            return {"policy": self.policy, "requests": self.requests, "unknown_prompts": self.unknown,
                    "escapes": list(self.escapes), "tasks": len(self.catalog)}

    def record(self, entry: dict) -> None:
        if self.log is not None:
            with self.lock, self.log.open("a") as f:
                f.write(json.dumps(entry) + "\n")


def make_handler(model: PolicyModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: Any) -> None:  # requests are logged as JSON instead
            pass

        def _json(self, obj: Any, status: int = 200) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = self.path.rstrip("/")
            if path.endswith("/models"):
                return self._json({"object": "list", "data": [
                    {"id": model.policy, "object": "model", "created": 0, "owned_by": "exactgrade"}]})
            if path.endswith("/stats"):
                return self._json(model.stats())
            self._json({"error": {"message": f"no route {self.path}"}}, 404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                return self._json({"error": {"message": f"no route {self.path}"}}, 404)
            if length > MAX_BODY:
                return self._json({"error": {"message": "request too large"}}, 413)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as e:
                return self._json({"error": {"message": f"invalid JSON: {e}"}}, 400)
            message, finish = model.reply(body)
            model.record({"time": time.time(), "reply": message, "messages": len(body.get("messages") or [])})
            cid, created = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())
            name = body.get("model", model.policy)
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            if not body.get("stream"):
                return self._json({"id": cid, "object": "chat.completion", "created": created, "model": name,
                                   "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                   "usage": usage})
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()

            def event(choices: list, **extra: Any) -> None:
                chunk = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                         "choices": choices, **extra}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())

            delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
            if message.get("tool_calls"):
                delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(message["tool_calls"])]
            event([{"index": 0, "delta": delta, "finish_reason": None}])
            event([{"index": 0, "delta": {}, "finish_reason": finish}])
            if (body.get("stream_options") or {}).get("include_usage"):
                event([], usage=usage)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


class PolicyHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # The stock backlog of 5 drops connections once dozens of rollouts call at once; each dropped
    # SYN is retried 1 s (then 3 s) later, which a run then reports as model time.
    request_queue_size = 1024


def serve(policy: str, port: int = 0, log: Path | None = None,
          canary_file: Path | None = None) -> ThreadingHTTPServer:
    """Build (not start) the server; its `model` attribute holds the PolicyModel."""
    canary = canary_file.read_text().strip() if canary_file is not None else ""
    server = PolicyHTTPServer(("127.0.0.1", port), BaseHTTPRequestHandler)
    model = PolicyModel(policy, load_catalog(), canary, str(canary_file or "/nonexistent"),
                        server.server_address[1], log)
    server.RequestHandlerClass = make_handler(model)
    server.model = model  # type: ignore[attr-defined]
    return server


def run(args: argparse.Namespace) -> int:
    server = serve(args.policy, args.port, args.log, args.canary_file)
    host, port = server.server_address[:2]
    print(f"policy server ({args.policy}, {len(server.model.catalog)} tasks) on http://{host}:{port}/v1",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


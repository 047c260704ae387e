"""The persistent worker inside a sandbox: runs model code, keeps its variables, reports back.

Requests arrive as JSON lines on one pipe; each gets exactly one JSON reply line on another:
    {"id": ID, "op": "init", "inputs": WIRE}  -> {"id": ID, "ok": true}
    {"id": ID, "op": "exec", "code": CODE}    -> {"id": ID, "ok": true, "output": TEXT}
    {"id": ID, "op": "bash", "cmd": CMD}      -> {"id": ID, "ok": true, "output": TEXT}
    {"id": ID, "op": "result"}                -> {"id": ID, "ok": true, "wire": WIRE | null}
    any failure of the worker itself          -> {"id": ID, "ok": false, "error": TEXT}
Model code runs in this very process, so it can forge or break any of this: the host treats
every reply as hostile and checks it strictly. Shipped inside the sandbox as `_eginside.worker`;
imports only the standard library, `_egwire` (the wire encoder) and `_eginside.readback` (natural
answers such as numpy scalars made wire values before encoding).
"""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
import traceback
from typing import Any

_dumps = json.dumps
_loads = json.loads
_write = os.write
_PRISTINE_JSON = {name: getattr(json, name) for name in ("dumps", "loads", "JSONEncoder", "JSONDecoder")}


class Worker:
    """State of one sandbox session: the model's namespace and the protocol pipes."""

    def __init__(self, request_fd: int, reply_fd: int, workdir: str, profile: str, max_output: int,
                 max_reply: int) -> None:
        from _eginside.readback import natural
        from _egwire import wire

        self.wire = wire
        self.natural = natural
        self.request_fd = request_fd
        self.reply_fd = reply_fd
        self.workdir = workdir
        self.profile = profile
        self.max_output = max_output
        self.max_reply = max_reply
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
        self.devnull = os.open(os.devnull, os.O_RDWR)
        self._buffer = b""

    # -- protocol --------------------------------------------------------------------------------
    def read_request(self) -> dict[str, Any] | None:
        while b"\n" not in self._buffer:
            chunk = os.read(self.request_fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return _loads(line)

    def reply(self, message: dict[str, Any]) -> None:
        data = (_dumps(message, ensure_ascii=True) + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            view = view[_write(self.reply_fd, view):]

    def serve(self) -> None:
        while True:
            request = self.read_request()
            if request is None:
                return
            try:
                answer = self.handle(request)
            except BaseException as error:  # the worker must answer every request exactly once
                answer = {"ok": False, "error": f"{type(error).__name__}: {str(error)[:500]}"}
            answer["id"] = request["id"]
            self.reply(answer)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        if op == "init":
            self.namespace.update(self.load_inputs(request["inputs"]))
            return {"ok": True}
        if op == "exec":
            return {"ok": True, "output": self.captured(lambda: self.run_code(request["code"]))}
        if op == "bash":
            return {"ok": True, "output": self.captured(lambda: self.run_bash(request["cmd"]))}
        if op == "result":
            return self.encode_result()
        raise ValueError(f"unknown op {op!r}")

    # -- operations ------------------------------------------------------------------------------
    def load_inputs(self, text: str) -> dict[str, Any]:
        inputs = self.wire.decode(text, max_bytes=len(text.encode()) + 1)
        if type(inputs) is not dict:
            raise ValueError("inputs must decode to a dict")
        if self.profile == "torch":
            inputs = {name: _to_torch(value) for name, value in inputs.items()}
        return inputs

    def run_code(self, code: str) -> None:
        try:
            exec(compile(code, "<cell>", "exec"), self.namespace)
        except SystemExit as stop:
            print(f"SystemExit: {stop.code}", file=sys.stderr)
        except BaseException as error:  # shown like a notebook would, without the worker's own frame
            traceback.print_exception(type(error), error, error.__traceback__.tb_next)

    def run_bash(self, cmd: str) -> None:
        try:
            done = subprocess.run(["/bin/bash", "-c", cmd], stdin=subprocess.DEVNULL, cwd=self.workdir)
        except (OSError, ValueError) as error:  # e.g. a NUL byte in the command: the model's mistake
            os.write(2, f"bash: {type(error).__name__}: {error}\n".encode())
            return
        status = done.returncode
        if status != 0:
            os.write(2, f"\n[exit status {status}]\n".encode())

    def captured(self, action: Any) -> str:
        """Run action with fds 1 and 2 pointing to a fresh memfd; return what was written, capped."""
        capture = os.memfd_create("output", os.MFD_CLOEXEC)
        _flush()
        os.dup2(capture, 1)
        os.dup2(capture, 2)
        try:
            action()
        finally:
            _flush()
            os.dup2(self.devnull, 1)
            os.dup2(self.devnull, 2)
        size = os.fstat(capture).st_size
        data = os.pread(capture, self.max_output, 0)
        os.close(capture)
        text = data.decode("utf-8", errors="replace")
        if size > self.max_output:
            text += f"\n[output truncated: {size} bytes in total, showing the first {self.max_output}]"
        return text

    def encode_result(self) -> dict[str, Any]:
        if "result" not in self.namespace:
            return {"ok": True, "wire": None}
        for name, original in _PRISTINE_JSON.items():  # undo naive patches of json used by the encoder
            setattr(json, name, original)
        try:
            text = self.wire.encode(self.natural(self.namespace["result"]))
        except BaseException as error:
            return {"ok": False, "error": f"cannot encode result: {type(error).__name__}: {str(error)[:300]}"}
        if len(text) > self.max_reply:
            message = f"encoded result has {len(text)} bytes, over the limit {self.max_reply}"
            return {"ok": False, "error": message}
        return {"ok": True, "wire": text}


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass


def _to_torch(value: Any) -> Any:
    """TensorValue -> torch.Tensor, recursively through lists and dicts."""
    from _egwire.values import TensorValue

    if type(value) is TensorValue:
        return value.to_torch()
    if type(value) is list:
        return [_to_torch(v) for v in value]
    if type(value) is dict:
        return {k: _to_torch(v) for k, v in value.items()}
    return value

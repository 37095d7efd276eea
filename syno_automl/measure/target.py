"""Targets: parsing, the ``<device>`` of metric names, RPC reachability, and what to build for.

``"llvm"`` (host CPU), ``"cuda"`` (when a GPU is present), ``"rpc:KEY@host:port"`` (a board behind a TVM RPC
tracker: kernels are built here and timed remotely), a tvm Target / JSON dict (local), and ``"torch"``: eager
PyTorch on CUDA when available, else the CPU (no TVM needed).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from syno_automl.echo import shown
from syno_automl.errors import OptionError
from syno_automl.measure.result import slug

__all__ = ["TargetSpec", "parse_target", "tracker_unreachable", "device_name", "safe_device_name", "resolve_target",
           "torch_device", "needs_tvm", "TVM_HINT", "TORCH"]

TORCH = "torch"
TVM_HINT = "pip install 'syno_automl[tvm]'"


@dataclass
class TargetSpec:
    name: str  # the spec as given ("llvm", "cuda", "rpc:KEY@host:port", "torch", ...)
    kind: str  # "local", "rpc" or "torch"
    key: str | None = None
    host: str | None = None
    port: int | None = None


def parse_target(spec: Any) -> TargetSpec:
    """``"llvm"`` | ``"cuda"`` | ``"rpc:KEY@host:port"`` | ``"torch"`` | a tvm Target / JSON dict (local)."""
    if isinstance(spec, str) and spec.startswith("rpc:"):
        body = spec[4:]
        key, sep, addr = body.rpartition("@")
        host, sep2, port = addr.rpartition(":")
        if not (sep and sep2 and key and host and port.isdigit()):
            raise OptionError(f"bad RPC target {shown(spec)}: expected rpc:KEY@host:port")
        return TargetSpec(spec, "rpc", key, host, int(port))
    if isinstance(spec, Mapping):
        return TargetSpec(json.dumps(dict(spec), sort_keys=True), "local")
    if isinstance(spec, str) and spec.strip() == TORCH:
        return TargetSpec(TORCH, "torch")
    return TargetSpec(str(spec), "local")


def needs_tvm(target: Any) -> bool:
    """Whether measuring on ``target`` needs TVM (every target but ``"torch"``)."""
    try:
        return parse_target(target).kind != "torch"
    except ValueError:
        return True


def tracker_unreachable(spec: TargetSpec, timeout: float = 10.0) -> str:
    """'' when the RPC tracker of ``spec`` accepts a TCP connection, else why not (TVM's own client retries
    for a minute before giving up)."""
    assert spec.port is not None  # parse_target gives an rpc spec its host and port
    try:
        with socket.create_connection((spec.host, spec.port), timeout=timeout):
            return ""
    except OSError as exc:
        return f"RPC tracker {spec.host}:{spec.port} unreachable ({exc})"


def device_name(target: Any) -> str:
    """The ``<device>`` of the metric names: ``"llvm"``, ``"cuda"``, ``"rpc-KEY"`` for ``rpc:KEY@host:port``,
    ``"torch"``; a Target / JSON dict gives its kind."""
    spec = parse_target(target)
    if spec.kind == "rpc":
        return f"rpc-{spec.key}"
    if spec.kind == "torch":
        return TORCH
    if isinstance(target, str) and not target.strip().startswith("{"):
        # MLflow metric names take letters, digits, _ - . / and spaces: "llvm -mcpu=x" -> "llvm_-mcpu_x"
        return "_".join(slug(part) for part in target.split())
    try:
        from syno_automl.codegen.tvm import make_target

        return str(make_target(target).kind.name)
    except Exception:  # noqa: BLE001 -- TVM missing or the target not parsed: the spec's name
        return spec.name


def safe_device_name(target: Any) -> str:
    try:
        return device_name(target)
    except Exception:  # noqa: BLE001 -- a name for messages: never raises
        return str(target)


def resolve_target(spec: TargetSpec, target: Any, build_target: Any = None) -> tuple[Any, str | None]:
    """(the TVM target to build for, None), or (None, why it cannot be used now): an unreachable RPC tracker, or
    CUDA asked for where no CUDA device is present."""
    import tvm

    from syno_automl.codegen.tvm import make_target

    if spec.kind == "rpc":
        why = tracker_unreachable(spec)
        if why:
            return None, f"target: {why}"
        return make_target(build_target if build_target is not None else "llvm"), None
    tgt = make_target(target)
    if tgt.kind.name == "cuda" and not tvm.cuda(0).exist:
        return None, "target: no CUDA device present"
    return tgt, None


def torch_device(target: Any) -> tuple[str | None, str]:
    """(torch device for the PyTorch timing of this target, or None; the reason when None). ``"torch"``: CUDA when
    available, else the CPU; a TVM target: the device of its kind (the Inductor comparison)."""
    spec = parse_target(target)
    if spec.kind == "torch":
        import torch

        return ("cuda" if torch.cuda.is_available() else "cpu"), ""
    if spec.kind == "rpc":
        return None, "inductor: not available on a remote (RPC) board"
    try:
        from syno_automl.codegen.tvm import make_target

        kind = make_target(target).kind.name
    except Exception as exc:  # noqa: BLE001 -- TVM missing or the target not parsed: the reason
        return None, f"inductor: target: {exc}"
    if kind in ("llvm", "c"):
        return "cpu", ""
    if kind == "cuda":
        import torch

        return ("cuda", "") if torch.cuda.is_available() else (None, "inductor: no CUDA device for torch")
    return None, f"inductor: no torch device for target kind {kind}"

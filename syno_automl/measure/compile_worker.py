"""A persistent compile worker: MetaSchedule candidates are compiled in a child process, each with a timeout.

One candidate's LLVM codegen can run for hours (seen: > 40 min in ``tvm.compile``'s ``codegen_build``); compiled in
the tuning process it hangs the whole tuning. :class:`CompileWorker` keeps one child (TVM's
``tvm.exec.popen_worker`` protocol: length-prefixed cloudpickle messages over two pipes) alive across batches and
tuning calls, so TVM is imported once per process (about 1.5 s: without torch), not per batch as in MetaSchedule's
``LocalBuilder``. A call that exceeds its timeout kills the child (and its children); the next call starts a fresh
one. A child that crashes only fails its call. The timeout is watched by this process (``select`` on the pipe), so
it fires even when the child's codegen never releases the GIL. The child's output goes to /dev/null: it must not
hold a caller's pipes open (``isolate.run_child`` reads its child's stderr to the end).

Every call returns ``(value, None)`` or ``(None, why)``: it never raises (a KeyboardInterrupt passes through).
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["BUILD_TIMEOUT_S", "WORKER_START_TIMEOUT_S", "BuildFn", "CompileWorker", "compile_candidate",
           "shared_worker"]

BUILD_TIMEOUT_S = 60.0         # per candidate; a normal compile takes 0.03-0.3 s here
WORKER_START_TIMEOUT_S = 300.0  # starting the child (import tvm): about 4 s idle, much more on a loaded machine
WORKER_MAX_USES = 1000  # then a fresh child: TVM's popen workers leak memory over many uses (LocalBuilder's note)

BuildFn = Callable[[Any, Any, bool], str]  # (IRModule, Target, shared_library) -> artifact path, run in the worker

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The child: TVM's popen worker, without torch. tvm_ffi imports torch whenever it is installed (for its DLPack
# interop: ~2.5 s of the child's ~4 s start, and its memory), and compiling a scheduled TIR candidate never uses it;
# torch marked absent, tvm_ffi's guarded import skips it. A build function that imports torch fails its call.
_WORKER_MAIN = "import sys; sys.modules['torch'] = None; from tvm.exec.popen_worker import main; main()"


def compile_candidate(mod: Any, target: Any, shared_library: bool) -> str:
    """Compile one scheduled candidate (in the worker) and export it: a ``.so`` the tuning process can load
    (``shared_library``: for the in-memory runner), else a tar for LocalRunner/RPCRunner. The path is in a new
    empty folder (the task scheduler removes the artifact's folder after the run)."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
    from tvm.support.tar import tar

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    rt_mod = tvm.compile(mod, target=target).mod
    folder = tempfile.mkdtemp(prefix="syno_ms_")
    if shared_library:
        path = os.path.join(folder, "kernel.so")
        rt_mod.export_library(path)
    else:
        path = os.path.join(folder, "kernel." + tar.output_format)
        rt_mod.export_library(path, fcompile=tar)
    return path


def _guarded(fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    """Runs in the worker: an exception comes back as its text (exception types need not survive pickling)."""
    try:
        return True, fn(*args)
    except Exception as exc:  # noqa: BLE001 -- the reason travels back; the worker stays usable
        return False, f"{type(exc).__name__}: {exc}"


class CompileWorker:
    """One child process that runs ``fn(*args)`` calls one at a time, each under a timeout.

    >>> worker = CompileWorker()
    >>> worker.call(compile_candidate, (mod, target, False), timeout_s=60.0)  # doctest: +SKIP
    ('/tmp/syno_ms_.../kernel.tar', None)
    """

    def __init__(self, start_timeout_s: float = WORKER_START_TIMEOUT_S, max_uses: int = WORKER_MAX_USES):
        self.start_timeout_s = start_timeout_s
        self.max_uses = max_uses
        self.restarts = 0  # children killed (timeout) or lost (crash)
        self._uses = 0
        self._lock = threading.RLock()  # one request at a time on the pipes
        self._proc: subprocess.Popen | None = None
        self._reader: int | None = None
        self._writer: Any = None
        self._ready = False
        self._pid = os.getpid()  # a forked copy must not use (or kill) its parent's child

    def start(self) -> None:
        """Start the child if none is running (returns at once; the first call waits until it is ready)."""
        with self._lock:
            self._start()

    def _start(self) -> None:
        if self._pid != os.getpid():  # a forked copy: close its copies of the pipes, leave the parent's child be
            self._pid = os.getpid()
            self._drop()
        if self._proc is not None and self._proc.poll() is None:
            return
        self._drop()
        main_read, worker_write = os.pipe()
        worker_read, main_write = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._proc = subprocess.Popen([sys.executable, "-c", _WORKER_MAIN, str(worker_read), str(worker_write)],
                                      pass_fds=(worker_read, worker_write), env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(worker_read)
        os.close(worker_write)
        self._reader = main_read
        self._writer = os.fdopen(main_write, "wb")
        self._ready = False

    def call(self, fn: Callable[..., Any], args: tuple = (), timeout_s: float | None = BUILD_TIMEOUT_S
             ) -> tuple[Any, str | None]:
        """``(fn(*args), None)`` computed in the child, or ``(None, why)``: the timeout passed (the child is killed),
        the child died, or ``fn`` raised. Interrupted (KeyboardInterrupt), the child is killed: a late answer must
        not be read as the next call's."""
        with self._lock:
            try:
                return self._call(fn, args, timeout_s)
            except BaseException:
                self.kill()
                raise

    def _call(self, fn: Callable[..., Any], args: tuple, timeout_s: float | None) -> tuple[Any, str | None]:
        if self._uses >= self.max_uses:
            self.close()
        try:
            self._start()
            if not self._ready:
                _, why = self._exchange(os.getpid, (), self.start_timeout_s)
                if why is not None:
                    return None, f"compile worker did not start: {why}"
                self._ready = True
            self._uses += 1
            ok_value, why = self._exchange(_guarded, (fn, *args), timeout_s)
        except Exception as exc:  # noqa: BLE001 -- e.g. the worker cannot be spawned, or an argument cannot be pickled
            self.kill()
            return None, f"compile worker: {type(exc).__name__}: {exc}"
        if why is not None:
            return None, why
        ok, value = ok_value
        return (value, None) if ok else (None, value)

    def _exchange(self, fn: Callable[..., Any], args: tuple, timeout_s: float | None) -> tuple[Any, str | None]:
        import cloudpickle
        from tvm.support.popen_pool import StatusKind  # the status codes of tvm.exec.popen_worker

        data = cloudpickle.dumps((fn, args, {}, None), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._writer.write(struct.pack("<i", len(data)))
            self._writer.write(data)
            self._writer.flush()
        except OSError:
            return None, self._lost()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        header = self._read(4, deadline)
        if header is None:
            return None, self._timed_out(timeout_s)
        if len(header) < 4:
            return None, self._lost()
        body = self._read(struct.unpack("<i", header)[0], deadline)
        if body is None:
            return None, self._timed_out(timeout_s)
        status, value = cloudpickle.loads(body)
        if status == StatusKind.COMPLETE:
            return value, None
        return None, f"compile worker: {status.name if isinstance(status, StatusKind) else status}: {value}"

    def _read(self, n: int, deadline: float | None) -> bytes | None:
        """``n`` bytes (fewer: the child closed the pipe), or None once ``deadline`` has passed."""
        reader = self._reader
        assert reader is not None  # _exchange reads only after _start opened the pipes
        chunks, got = [], 0
        while got < n:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([reader], [], [], wait)
            if not readable:
                return None
            chunk = os.read(reader, n - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _timed_out(self, timeout_s: float | None) -> str:
        self.kill()
        return f"build timed out after {timeout_s:g} s (compile worker killed)"

    def _lost(self) -> str:
        code = None
        if self._proc is not None:
            try:  # the pipe closes a moment before the exit status is there
                code = self._proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        return f"compile worker died (exit code {code})"

    def kill(self) -> None:
        """Kill the child and its children now; the next call starts a new one."""
        if self._proc is not None and self._pid == os.getpid():
            self.restarts += 1
            try:
                import psutil

                for child in psutil.Process(self._proc.pid).children(recursive=True):
                    child.kill()
            except Exception:  # noqa: BLE001 -- best effort: psutil missing, or the child already gone
                pass
            self._proc.kill()
            self._proc.wait()
        self._drop()

    def close(self) -> None:
        """Stop the child: it exits on end of input; killed if it does not within a second."""
        if self._proc is None or self._pid != os.getpid():
            return
        try:
            self._writer.close()
            self._proc.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()
        self._drop()

    def _drop(self) -> None:
        if self._pid == os.getpid():

            def close_writer() -> None:
                if self._writer:
                    self._writer.close()

            def close_reader() -> None:
                if self._reader is not None:
                    os.close(self._reader)

            for close in (close_writer, close_reader):
                try:
                    close()
                except OSError:
                    pass
        self._proc, self._reader, self._writer, self._ready, self._uses = None, None, None, False, 0


_SHARED: CompileWorker | None = None


def shared_worker() -> CompileWorker:
    """The process-wide worker every builder uses (started on first use, stopped at exit)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = CompileWorker()
        atexit.register(_SHARED.close)
    return _SHARED

"""bench/gpu_window.py --dry-run (issue 45 item 5): every step of the prepared GPU script runs on the CPU at tiny
sizes, in the children the real window uses, and writes its JSON lines with the keys the window's reader needs;
the caches are packed and a second window takes them back with --cache."""
from __future__ import annotations

import json
import random
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_window.py"
OPS = "ad6c0141110ce7ad,c740ab233de2e0ec"   # the grouped conv (a 5-D weight) and the default search's verdict
RATIO_KEYS = {"candidate", "baseline", "baseline_ms", "ms", "speedup", "low", "high", "rounds", "flops", "bytes",
              "floor_ms", "below_roofline", "conditions"}


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "window.jsonl").read_text().splitlines()]


def test_the_dry_run_runs_every_step_and_writes_its_rows(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out), "--ops", OPS],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout[-3000:], (out / "window.log").read_text()[-3000:])
    rows = _rows(out)
    by = lambda step, kind: [r for r in rows if r["step"] == step and r["kind"] == kind]  # noqa: E731
    assert [r["name"] for r in by("window", "step_done")] == ["env", "e2e224", "cifar32", "layers", "train"]
    env, = by("env", "env")
    assert {"torch", "triton", "device", "cudnn", "caches"} <= env.keys() and env["dry_run"] is True
    roof, = by("env", "roof")
    assert roof["matmul_tflops"] > 0 and roof["copy_gbs"] > 0
    e2e = by("e2e224", "ratio")
    assert {(r["model"], r["op"]) for r in e2e} == {(m, op) for m in ("resnet18", "resnet34") for op in OPS.split(",")}
    assert all(RATIO_KEYS <= r.keys() and r["replaced"] > 0 and r["low"] <= r["speedup"] <= r["high"] for r in e2e)
    assert sum(r["candidate"] == "control" for r in e2e) == 4  # one control per comparison
    cifar = by("cifar32", "ratio")
    assert {r["candidate"] for r in cifar} == {f"{op}.{b}" for op in OPS.split(",") for b in ("torch", "triton")} | {
        "control"}
    assert all(r["conditions"]["channels_last"] and r["conditions"]["cudnn_benchmark"] for r in cifar)
    settings = by("cifar32", "setting")
    assert len(settings) == 8 and all({"setting", "ms", "floor_ms", "below_roofline"} <= r.keys() for r in settings)
    skipped = [r for r in by("cifar32", "skipped") if r["why"] == "dry run: not compiled"]
    assert {r["setting"]["compile_mode"] for r in skipped} == {"default", "max-autotune"}
    layers = by("layers", "ratio")
    assert {r["candidate"] for r in layers} >= {"grouped2", "dw+pw", "control", f"{OPS[:16]}.eager",
                                                f"{OPS[:16]}.triton"}
    assert {(r["layer"], r["batch"]) for r in layers} == {("8x16", 1), ("8x16", 2), ("32x4", 1), ("32x4", 2)}
    train = by("train", "ratio")
    assert {r["candidate"] for r in train} == set(OPS.split(",")) | {"control"}
    assert all(RATIO_KEYS <= r.keys() for r in layers + train + cifar)
    assert not [r for r in rows if r.get("below_roofline")]  # the dry run's ceiling no CPU reaches
    cache, = by("window", "cache")
    assert cache["files"] == ["cache.tar.gz"] and tarfile.is_tarfile(out / "cache.tar.gz")


def _window_module():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_window
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return gpu_window


def test_caches_are_packed_in_parts_and_unpacked(tmp_path, monkeypatch):
    """A cache larger than a part comes back as cache.tar.gz.partN files, which --cache joins and unpacks."""
    window = _window_module()
    work, out, again = tmp_path / "work", tmp_path / "out", tmp_path / "again"
    (work / "triton").mkdir(parents=True)
    data = random.Random(0).randbytes(16384)  # 16 KiB that do not compress
    (work / "triton" / "kernel.bin").write_bytes(data)
    out.mkdir()
    again.mkdir()
    monkeypatch.setattr(window, "PART", 4096)
    names = window._pack(work, out)
    assert len(names) > 1 and names[0] == "cache.tar.gz.part0" and not (out / "cache.tar.gz").exists()
    env = window._caches(again, out)
    assert env["TRITON_CACHE_DIR"] == str(again / "triton")
    assert (again / "triton" / "kernel.bin").read_bytes() == data


def test_steps_reruns_one_and_cache_is_taken_back(tmp_path):
    """--steps env runs that step alone; --cache DIR unpacks DIR's cache.tar.gz into the caches the steps use."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    (cache / "triton").mkdir(parents=True)
    (cache / "triton" / "marker").write_text("kept")
    with tarfile.open(cache / "cache.tar.gz", "w:gz") as tar:
        tar.add(cache / "triton", arcname="triton")
    subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out), "--steps", "env", "--cache",
                    str(cache)], check=True, capture_output=True, timeout=120)
    assert (out / "work" / "triton" / "marker").read_text() == "kept"
    rows = _rows(out)
    assert [r["name"] for r in rows if r["kind"] == "step_done"] == ["env"]
    env, = [r for r in rows if r["kind"] == "env"]
    assert env["caches"]["TRITON_CACHE_DIR"] == str(out / "work" / "triton")
    with tarfile.open(out / "cache.tar.gz") as tar:  # packed again, with what the window found
        assert "triton/marker" in tar.getnames()

#!/usr/bin/env python3
"""The Python API on a GPU (issue 30): for each model, optimized at -O3 in process, a
CUDAExecutionProvider session against a CPU one — numpy in and out through `run`, torch CUDA
tensors in and CUDA tensors out through `run_dlpack` (checked to be the session's own memory,
not a copy), and with a CUDA Graph replayed. Prints one markdown row per model and exits 1 if
any output differs or anything but an unsupported model fails. Needs torch with CUDA.

    PYTHONPATH=python FUSIONOPT_LIBRARY=build/libfusionopt.so.1 python3 scripts/gpu_python_check.py models/*.onnx
(scripts/gpu_check.sh runs it with the bundle's library.)
"""
import sys
import traceback

import numpy as np

import fusionopt

_NUMPY = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
          "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def feeds_for(session, seed=0):
    """Random feeds for the declared inputs: symbolic dims 2, integers 0 or 1 (ids, masks)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for arg in session.get_inputs():
        shape = [dim if isinstance(dim, int) else 2 for dim in (arg.shape or [])]
        dtype = _NUMPY[arg.type]
        if np.issubdtype(dtype, np.floating):
            feeds[arg.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[arg.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def worst_difference(actual, expected):
    """The largest |a - e| / (atol + rtol |e|) over the outputs (float16 outputs: looser)."""
    worst = 0.0
    for a, e in zip(actual, expected):
        a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
        rtol, atol = (2e-2, 4e-3) if np.asarray(expected[0]).dtype == np.float16 else (1e-3, 1e-4)
        if a.shape != e.shape:
            return float("inf")
        if a.size:
            worst = max(worst, float(np.max(np.abs(a - e) / (atol + rtol * np.abs(e)))))
    return worst


def check_model(path):
    """(verdict, detail) for one model: "pass", "FAIL" or "unsupported"."""
    import torch
    optimized, _ = fusionopt.optimize(str(path), level=3)
    cpu = fusionopt.InferenceSession(optimized)
    feeds = feeds_for(cpu)
    expected = cpu.run(None, feeds)
    try:
        cuda = fusionopt.InferenceSession(optimized, providers=["CUDAExecutionProvider"])
    except fusionopt.UnsupportedModelError as error:
        return "unsupported", str(error)
    results = {"run": worst_difference(cuda.run(None, feeds), expected)}
    device_feeds = {name: torch.from_numpy(value).cuda() for name, value in feeds.items()}
    tensors = cuda.run_dlpack(None, device_feeds)
    lent = [torch.from_dlpack(tensor) for tensor in tensors]
    if not all(t.is_cuda and t.data_ptr() == tensor._data for t, tensor in zip(lent, tensors)):
        return "FAIL", "run_dlpack's outputs are not the session's device memory"
    results["dlpack"] = worst_difference([t.cpu().numpy() for t in lent], expected)
    options = fusionopt.SessionOptions()
    options.enable_cuda_graph = True
    graphed = fusionopt.InferenceSession(optimized, providers=["CUDAExecutionProvider"], sess_options=options)
    graphed.run(None, device_feeds)
    results["cuda graph"] = worst_difference(graphed.run(None, device_feeds), expected)
    detail = ", ".join(f"{name} {value:.3g}" for name, value in results.items())
    return ("pass" if max(results.values()) <= 1.0 else "FAIL"), detail


def main(paths):
    print("| model | CUDA session vs CPU (worst difference / tolerance) |")
    print("|---|---|")
    failed = 0
    for path in paths:
        try:
            verdict, detail = check_model(path)
        except Exception as error:  # noqa: BLE001 — every failure is reported, the rest still run
            verdict, detail = "FAIL", f"{type(error).__name__}: {error}"
            traceback.print_exc(file=sys.stderr)
        failed += verdict == "FAIL"
        print(f"| {path} | {verdict}: {detail} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Optimize an ONNX model for ONNX Runtime with fusionopt, then run the original and the
optimized model with onnxruntime and compare them (docs/ort.md).

    python3 docs/examples/optimize_for_ort.py model.onnx model.ort.onnx [--fusionopt build/fusionopt]

Integer inputs (token ids, masks) are fed ones, float inputs seeded normal values; a symbolic
dim is 1 when it comes first (the batch) and 16 elsewhere (the sequence).
"""
import argparse
import subprocess
import time

import numpy as np
import onnxruntime as ort

NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
               "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def feeds_for(session, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in session.get_inputs():
        shape = [dim if isinstance(dim, int) else (1 if axis == 0 else 16) for axis, dim in enumerate(spec.shape)]
        dtype = NUMPY_TYPES[spec.type]
        if np.issubdtype(dtype, np.floating):
            feeds[spec.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[spec.name] = np.ones(shape, dtype)
    return feeds


def p50_ms(session, feeds, runs=20):
    session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("output")
    parser.add_argument("--fusionopt", default="fusionopt")
    args = parser.parse_args()

    # The same passes as any -O3 run; the groups ONNX Runtime has kernels for come out as its
    # com.microsoft ops (Attention, SkipLayerNormalization, BiasGelu, ...).
    subprocess.run([args.fusionopt, args.model, "-O3", "--runtime", "ort", "-o", args.output], check=True)

    original = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    optimized = ort.InferenceSession(args.output, providers=["CPUExecutionProvider"])
    feeds = feeds_for(original)
    for name, want, got in zip([o.name for o in original.get_outputs()], original.run(None, feeds),
                               optimized.run(None, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, err_msg=name)
    print(f"outputs match; onnxruntime p50: original {p50_ms(original, feeds):.2f} ms, "
          f"optimized {p50_ms(optimized, feeds):.2f} ms")


if __name__ == "__main__":
    main()

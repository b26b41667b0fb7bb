#!/usr/bin/env python3
"""Kernel launches per inference on the CUDA backend, O0 vs O3, for issue 6's benchmark set —
known without a GPU: `fusionopt inspect --cuda` plans each model in a compile-only plugin
context (every kernel generated and compiled by NVRTC, library calls planned) and counts the
launches one inference issues. Also the nodes without a CUDA kernel, if any.

    .venv/bin/python bench/cuda_launches.py [--arch 90] [--sequence 128]
"""
import argparse
import json
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_common as common  # noqa: E402
from compare import PROJECT_SET, SHARED_SET  # noqa: E402


def plan(binary, model, arch, feeds):
    shapes = [f"--shape={name}={'x'.join(map(str, array.shape))}" for name, array in feeds.items()]
    done = common.run_fusionopt_allowing(binary, (0, 4), "inspect", model, "--cuda", "--json", "--cuda-arch", arch,
                                         *shapes)
    return json.loads(done.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--sequence", type=int, default=128)
    parser.add_argument("--binary", default=str(common.DEFAULT_BINARY))
    args = parser.parse_args()
    common.ensure_bench_models(list(PROJECT_SET))
    models = [(name, common.SHARED_MODELS / file) for name, file in SHARED_SET.items()
              if (common.SHARED_MODELS / file).is_file()]
    models += [(f"{name} (bench)", common.BENCH_MODELS / f"{name}.onnx") for name in PROJECT_SET]
    print(f"sm_{args.arch}, sequence {args.sequence}")
    print("| model | CUDA launches O0 | CUDA launches O3 | O0 / O3 | nodes without a CUDA kernel (O0, O3) |")
    print("|---|---:|---:|---:|---|")
    for label, path in models:
        feeds = common.make_inputs(path, 0, args.sequence)
        plans = {}
        with tempfile.TemporaryDirectory() as folder:
            for level in (0, 3):
                out = pathlib.Path(folder) / f"model.O{level}.onnx"
                common.run_fusionopt(args.binary, path, f"-O{level}", "-o", out)
                plans[level] = plan(args.binary, out, args.arch, feeds)
        o0, o3 = plans[0]["launches_per_inference"], plans[3]["launches_per_inference"]
        missing = ", ".join(f"{node['op']}" for level in (0, 3) for node in plans[level]["nodes"] if node["unsupported"])
        print(f"| {label} | {o0} | {o3} | {o0 / o3:.2f} | {missing or 'none'} |", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Kernel launches per inference on the CUDA backend, O0 vs O3, for issue 6's benchmark set or
the real-export corpus (--corpus fixtures|full, issue 28) — known without a GPU: `fusionopt
inspect --cuda` plans each model in a compile-only plugin context (every kernel generated and
compiled by NVRTC, library calls planned) and counts the launches one inference issues. Also the
nodes without a CUDA kernel, and the fused nodes run as their body's ops, if any; for the corpus
(at its manifest sizes) the cost model's predicted O3 speed-up for the GPU target too.

    .venv/bin/python bench/cuda_launches.py [--arch 90] [--sequence 128]
    .venv/bin/python bench/cuda_launches.py --corpus fixtures [--only bert gpt2] [--target h100]
"""
import argparse
import json
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_common as common  # noqa: E402
from compare import PROJECT_SET, SHARED_SET  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "models" / "real"))
import corpus  # noqa: E402


def plan(binary, model, arch, feeds):
    shapes = [f"--shape={name}={'x'.join(map(str, array.shape))}" for name, array in feeds.items()]
    done = common.run_fusionopt_allowing(binary, (0, 4), "inspect", model, "--cuda", "--json", "--cuda-arch", arch,
                                         *shapes)
    return json.loads(done.stdout)


def predicted(binary, model, path, entry, target):
    """The cost model's O3 speed-up for `target` at the entry's manifest sizes, or why none."""
    import onnx
    sizes = {spec["name"]: spec["shape"] for spec in entry.info["inputs"]}
    dims = {}
    for value in onnx.load(str(path), load_external_data=False).graph.input:
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.dim_param and value.name in sizes:
                dims[dim.dim_param] = sizes[value.name][axis]
    flags = [arg for symbol, size in dims.items() for arg in ("--dim", f"{symbol}={size}")]
    done = common.run_fusionopt(binary, "inspect", model, "--cost", "--target", target, *flags)
    line = next((line for line in done.stdout.splitlines() if line.startswith("predicted speed-up")), "")
    return line.removeprefix("predicted speed-up: ") or "—"


def corpus_table(args):
    _, entries = corpus.select(args.corpus, args.only)
    print(f"sm_{args.arch}, manifest sizes, cost-model target {args.target}")
    print("| model | CUDA launches O0 | CUDA launches O3 | O0 / O3 | unsupported | fused nodes run as ops | "
          "predicted O3 speed-up |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for entry in entries:
        shapes = [f"--shape={spec['name']}={'x'.join(map(str, spec['shape']))}" for spec in entry.info["inputs"]]
        plans = {}
        with tempfile.TemporaryDirectory() as folder:
            for level in (0, 3):
                out = pathlib.Path(folder) / f"model.O{level}.onnx"
                common.run_fusionopt(args.binary, entry.path, f"-O{level}", "-o", out)
                done = common.run_fusionopt_allowing(args.binary, (0, 4), "inspect", out, "--cuda", "--json",
                                                     "--cuda-arch", args.arch, *shapes)
                plans[level] = json.loads(done.stdout)
            speedup = predicted(args.binary, out, entry.path, entry, args.target)
        o0, o3 = plans[0]["launches_per_inference"], plans[3]["launches_per_inference"]
        unsupported = plans[0]["unsupported"] + plans[3]["unsupported"]
        inlined = plans[0]["fused_nodes_inlined"] + plans[3]["fused_nodes_inlined"]
        print(f"| {entry.name} | {o0} | {o3} | {o0 / o3:.2f} | {unsupported} | {inlined} | {speedup} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--sequence", type=int, default=128)
    parser.add_argument("--binary", default=str(common.DEFAULT_BINARY))
    parser.add_argument("--corpus", help="the real-export corpus instead: fixtures, full, or a folder with a manifest")
    parser.add_argument("--only", nargs="*", help="with --corpus: families or model-name prefixes")
    parser.add_argument("--target", default="h100", help="with --corpus: the cost model's target (default h100)")
    args = parser.parse_args()
    if args.corpus:
        return corpus_table(args)
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

"""The quantized corpus: real exports quantized the ways deployments quantize them, with
onnxruntime's own quantizer (issue 43). It reads the float exports export.py wrote and needs
only onnxruntime and numpy (the dev venv), no torch:

    .venv/bin/python models/real/quantize.py            # fixtures: models/real/fixtures/quantized
    .venv/bin/python models/real/quantize.py --full     # full size: models/bench/real/quantized
    .venv/bin/python models/real/quantize.py --only resnet bert

Forms (each a file `<source>.<form>.onnx`):

  qdq        quantize_static, QDQ format, per-channel int8 weights, uint8 activations
             (onnxruntime's defaults otherwise), calibrated on the manifest's feeds
  qoperator  quantize_static, QOperator format (QLinearConv, QLinearMatMul, com.microsoft
             QLinearAdd, QGemm, ...), per-tensor weights
  dynamic    quantize_dynamic, int8 weights (DynamicQuantizeLinear + MatMulInteger/ConvInteger)
  nbits      MatMulNBitsQuantizer, 4-bit symmetric weights in blocks of 32 (com.microsoft
             MatMulNBits)
  int4qdq    the same weights as ONNX opset-21 DequantizeLinear(int4, block_size 32) → MatMul

The calibration feeds are the manifest's feeds (corpus.py) at four seeds, so the fixtures are
reproducible. The manifest (same schema as the float one, plus `form` and `quantized_from`)
keeps each model's inputs, so corpus.py and the tests feed them the same way.
"""
import argparse
import collections
import contextlib
import hashlib
import io
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import onnx
import onnxruntime
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)
from onnxruntime.quantization import matmul_nbits_quantizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

CALIBRATION_SEEDS = (0, 1, 2, 3)
# The float exports quantized, and the forms each gets. CNNs ship as static int8 (both
# formats) and dynamic; transformers as static, dynamic and, for decoders, 4-bit weights.
SOURCES = {
    "resnet_dynamo18": ("qdq", "qoperator", "dynamic"),
    "mobilenet_v3_dynamo18": ("qdq", "qoperator"),
    "efficientnet_dynamo18": ("qdq",),
    "yolov8n_dynamo18": ("qdq",),
    "bert_dynamo18_sdpa": ("qdq", "qoperator", "dynamic", "nbits"),
    "bert_torchscript17_eager": ("dynamic",),
    "vit_dynamo18_sdpa": ("qdq", "dynamic"),
    "gpt2_dynamo18_sdpa": ("qdq", "dynamic"),
    "llama_dynamo18_sdpa": ("qdq", "dynamic", "nbits", "int4qdq"),
}
FULL_SOURCES = {
    "resnet_dynamo18": ("qdq", "qoperator", "dynamic"),
    "mobilenet_v3_dynamo18": ("qdq",),
    "efficientnet_dynamo18": ("qdq",),
    "yolov8n_dynamo18": ("qdq",),
    "bert_dynamo18_sdpa": ("qdq", "dynamic", "nbits"),
    "vit_dynamo18_sdpa": ("qdq", "dynamic"),
    "gpt2_dynamo18_sdpa": ("qdq", "dynamic"),
    "llama_dynamo18_sdpa": ("qdq", "dynamic", "nbits", "int4qdq"),
}
# GPT-2's projections are Gemms (its Conv1D), which the 4-bit quantizer leaves alone.


class Feeds(CalibrationDataReader):
    def __init__(self, entry):
        self.batches = iter([entry.feeds(seed=seed) for seed in CALIBRATION_SEEDS])

    def get_next(self):
        return next(self.batches, None)


def quantize(entry, form, out_path):
    source = str(entry.path)
    if form in ("qdq", "qoperator"):
        quantize_static(source, str(out_path), Feeds(entry),
                        quant_format=QuantFormat.QDQ if form == "qdq" else QuantFormat.QOperator,
                        per_channel=form == "qdq", activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    elif form == "dynamic":
        quantize_dynamic(source, str(out_path), weight_type=QuantType.QInt8)
    elif form in ("nbits", "int4qdq"):
        quantizer = matmul_nbits_quantizer.MatMulNBitsQuantizer(
            onnx.load(source), bits=4, block_size=32, is_symmetric=True,
            quant_format=QuantFormat.QDQ if form == "int4qdq" else QuantFormat.QOperator)
        quantizer.process()
        quantizer.model.save_model_to_file(str(out_path))
    else:
        raise ValueError(f"unknown form {form}")


def quantization_ops(model):
    """The quantization ops a model holds, by domain::op, for the manifest."""
    names = ("Quantize", "Dequantize", "QLinear", "Integer", "QGemm", "MatMulNBits")
    counts = collections.Counter((node.domain or "ai.onnx") + "::" + node.op_type for node in model.graph.node
                                 if any(name in node.op_type for name in names))
    return dict(sorted(counts.items()))


def entry_for(source, form, path):
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    ops = quantization_ops(model)
    if not ops:
        raise SystemExit(f"error: {path.name}: the quantizer quantized nothing")
    info = dict(source.info)
    info.update({
        "file": path.name, "form": form, "quantized_from": source.path.name,
        "opset": next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
        "nodes": len(model.graph.node), "quantization_ops": ops,
        "bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    })
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the full-size exports (models/bench/real)")
    parser.add_argument("--only", nargs="*", help="families or model-name prefixes (default: all listed)")
    args = parser.parse_args()
    folder = corpus.FULL_SIZE if args.full else corpus.FIXTURES
    out = folder / "quantized"
    out.mkdir(parents=True, exist_ok=True)
    sources = {entry.name: entry for entry in corpus.load(folder)}
    wanted = FULL_SOURCES if args.full else SOURCES
    missing = [name for name in wanted if name not in sources]
    if missing:
        sys.exit(f"error: {folder}: no float export {missing} (run models/real/export.py{' --full' if args.full else ''})")
    manifest_path = out / "manifest.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": []}
    entries = {entry["file"]: entry for entry in old["models"]}
    logging.getLogger().setLevel(logging.ERROR)
    for name, forms in wanted.items():
        entry = sources[name]
        if args.only and not any(name.startswith(o) or entry.info["family"] == o for o in args.only):
            continue
        for form in forms:
            started = time.time()
            path = out / f"{name}.{form}.onnx"
            with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(io.StringIO()):
                temporary = Path(scratch) / path.name
                quantize(entry, form, temporary)
                temporary.replace(path)
            entries[path.name] = entry_for(entry, form, path)
            print(f"{path.name}: {entries[path.name]['nodes']} nodes, {path.stat().st_size / 1e6:.2f} MB, "
                  f"{time.time() - started:.1f} s", flush=True)
    manifest = {"generator": "models/real/quantize.py" + (" --full" if args.full else ""),
                "versions": {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__},
                "calibration_seeds": list(CALIBRATION_SEEDS),
                "models": [entries[k] for k in sorted(entries)]}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""`fusionopt MODEL -O3 -o OUT --emit-cuda DIR`: the generated CUDA sources of every fused node,
one self-contained .cu file per distinct program (each compiles alone with nvcc --ptx) and
DIR/index.json mapping every ai.fusionopt node to its file or to the reason it has none."""
import json
import shutil
import subprocess
from pathlib import Path

import onnx
import pytest

import fusionopt_testlib as lib

NVCC = Path("/usr/local/cuda/bin/nvcc")
BERT = lib.PROJECT_MODELS / "bert_style.onnx"


def fused_node_names(model_path):
    model = onnx.load(str(model_path))
    return [node.name for node in model.graph.node if node.domain == "ai.fusionopt"]


@pytest.fixture
def emitted(fusionopt, tmp_path):
    """bert_style at O3 with --emit-cuda: (result, output model, folder), input unchanged."""
    if not BERT.is_file():
        pytest.skip("models/bert_style.onnx is absent; generate it with models/generate.py")
    snapshot = lib.FileSnapshot(BERT)
    output, folder = tmp_path / "out.onnx", tmp_path / "nested" / "cuda"
    result = fusionopt(BERT, "-O3", "-o", output, "--emit-cuda", folder, "--dim", "batch=2", "--dim", "sequence=16")
    snapshot.assert_unchanged()
    assert result[0] == lib.EXIT_OK, result[2]
    return result, output, folder


def test_index_lists_every_fused_node(emitted):
    result, output, folder = emitted
    index = json.loads((folder / "index.json").read_text())
    assert index["symbolic_dims"] == {"batch": 2, "sequence": 16}
    nodes = index["nodes"]
    assert [entry["node"] for entry in nodes] == fused_node_names(output)
    generated = [entry for entry in nodes if entry["file"] is not None]
    unsupported = [entry for entry in nodes if entry["file"] is None]
    assert generated, "bert_style's elementwise fused nodes must be generated"
    for entry in generated:
        assert (folder / entry["file"]).is_file(), entry
        assert entry["kernels"] and entry["description"], entry
        for kernel in entry["kernels"]:
            assert len(kernel["grid"]) == 3 and len(kernel["block"]) == 3 and kernel["shared_bytes"] >= 0
            assert f'extern "C" __global__' in (folder / entry["file"]).read_text()
            assert kernel["entry"] in (folder / entry["file"]).read_text()
        assert isinstance(entry["constant_inputs"], list) and entry["workspace_bytes"] >= 0
    for entry in unsupported:
        assert entry["unsupported_reason"], entry
    assert any("MatMul" in entry["unsupported_reason"] or "contraction" in entry["unsupported_reason"]
               for entry in unsupported) or not unsupported
    info = result[1] + result[2]
    assert f"--emit-cuda: {len(generated)} fused nodes generated" in info
    assert f"{len(unsupported)} unsupported" in info


def test_sources_are_written_once_and_nothing_else(emitted):
    _, _, folder = emitted
    index = json.loads((folder / "index.json").read_text())
    named = {entry["file"] for entry in index["nodes"] if entry["file"] is not None}
    written = {path.name for path in folder.glob("*.cu")}
    assert written == named
    contents = [path.read_text() for path in folder.glob("*.cu")]
    assert len(contents) == len(set(contents)), "identical sources must share one file"
    assert lib.stray_temp_files(folder) == []
    assert sorted(p.name for p in folder.iterdir()) == sorted(written | {"index.json"})


@pytest.mark.skipif(not NVCC.is_file(), reason=f"{NVCC} is absent: the .cu files are not compiled")
def test_each_source_compiles_alone_with_nvcc(emitted, tmp_path):
    _, _, folder = emitted
    sources = sorted(folder.glob("*.cu"))
    assert sources
    for source in sources:
        ptx = tmp_path / (source.stem + ".ptx")
        completed = subprocess.run([str(NVCC), "--ptx", "-arch=sm_90", str(source), "-o", str(ptx)],
                                   capture_output=True, text=True, timeout=300)
        assert completed.returncode == 0, f"{source.name}:\n{completed.stderr}"
        assert ".entry" in ptx.read_text()


def test_a_file_in_place_of_the_folder_is_an_io_error_and_nothing_is_written(fusionopt, tmp_path):
    if not BERT.is_file():
        pytest.skip("models/bert_style.onnx is absent")
    blocker = tmp_path / "cuda"
    blocker.write_text("not a folder")
    snapshot = lib.FileSnapshot(blocker)
    output = tmp_path / "out.onnx"
    result = fusionopt(BERT, "-O3", "-o", output, "--emit-cuda", blocker)
    lib.assert_error(result, lib.EXIT_IO, str(blocker), "not a folder")
    snapshot.assert_unchanged()
    assert not output.exists()
    assert lib.folder_listing(tmp_path) == ["cuda"]


def test_a_file_above_the_folder_is_an_io_error(fusionopt, tmp_path):
    if not BERT.is_file():
        pytest.skip("models/bert_style.onnx is absent")
    (tmp_path / "plain").write_text("a file")
    output = tmp_path / "out.onnx"
    target = tmp_path / "plain" / "cuda"
    result = fusionopt(BERT, "-O3", "-o", output, "--emit-cuda", target)
    lib.assert_error(result, lib.EXIT_IO, str(target), "not a folder")
    assert not output.exists()


def test_help_documents_the_flag(fusionopt):
    rc, stdout, _ = fusionopt("optimize", "--help")
    assert rc == lib.EXIT_OK
    assert "--emit-cuda" in stdout


FP16_BERT = lib.PROJECT_MODELS / "real" / "fixtures" / "bert_dynamo18_sdpa_fp16.onnx"


def emit_attention(fusionopt, tmp_path, *arch):
    """The fp16 dynamo BERT export at -O3 with --emit-cuda (sequence 40, within its 64 positions: a partial query tile, keys 32 + 8):
    the index and the FusedAttention entries."""
    if not FP16_BERT.is_file():
        pytest.skip(f"{FP16_BERT} is not committed")
    folder = tmp_path / ("cuda" + "".join(arch))
    result = fusionopt(FP16_BERT, "-O3", "-o", tmp_path / "out.onnx", "--emit-cuda", folder, "--dim", "batch=2",
                       "--dim", "sequence=40", *arch)
    assert result[0] == lib.EXIT_OK, result[2]
    index = json.loads((folder / "index.json").read_text())
    attention = [entry for entry in index["nodes"] if entry["function"].startswith("FusedAttention")]
    assert len(attention) == 2
    return folder, index, attention


def test_dynamo_exports_are_specialized_as_the_backend_plans_them(fusionopt, tmp_path):
    """Issue 28: the dynamo export's attention Reshape targets are computed from the inputs' shapes;
    --emit-cuda folds them at the --dim sizes as the CUDA backend does, so attention is generated
    (it had been 'no static shape'). Without --cuda-arch, the kernel every architecture compiles."""
    _, index, attention = emit_attention(fusionopt, tmp_path)
    assert index["cuda_arch"] is None and index["symbolic_dims"] == {"batch": 2, "sequence": 40}
    for entry in attention:
        assert entry["file"], entry.get("unsupported_reason")
        assert entry["description"].startswith("flash attention (online softmax"), entry["description"]


@pytest.mark.skipif(not NVCC.is_file(), reason=f"{NVCC} is absent: the .cu files are not compiled")
def test_cuda_arch_80_and_up_generates_tensor_core_attention(fusionopt, tmp_path):
    folder, index, attention = emit_attention(fusionopt, tmp_path, "--cuda-arch", "90")
    assert index["cuda_arch"] == 90
    for entry in attention:
        assert entry["description"].startswith("flash attention on tensor cores (mma.sync m16n8k16 fp16")
        # 64 queries per CTA: one tile of 40 for each of batch 2 x 4 heads.
        assert entry["kernels"][0]["grid"] == [8, 1, 1] and entry["kernels"][0]["block"] == [128, 1, 1]
    source = folder / attention[0]["file"]
    ptx = tmp_path / "attention.ptx"
    completed = subprocess.run([str(NVCC), "--ptx", "-arch=sm_90", str(source), "-o", str(ptx)],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx.read_text()


def test_cuda_arch_needs_emit_cuda(fusionopt, tmp_path):
    if not BERT.is_file():
        pytest.skip("models/bert_style.onnx is absent")
    result = fusionopt(BERT, "-O3", "-o", tmp_path / "out.onnx", "--cuda-arch", "90")
    lib.assert_error(result, lib.EXIT_USAGE, None, "--cuda-arch requires --emit-cuda")
    assert not (tmp_path / "out.onnx").exists()

"""DLPack in and out of fusionopt.InferenceSession on the CPU (python/fusionopt/dlpack.py): outputs
lent to numpy without a copy and outliving their session, any DLPack array accepted as an input,
outputs fed back in, and device memory a CPU session cannot read refused by name. The CUDA side
(device arrays in, device tensors out) runs on a GPU machine: scripts/gpu_python_check.py."""
import ctypes
import gc
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import fusionopt_testlib as lib

fusionopt = lib.import_fusionopt()
SMALL_CNN = lib.PROJECT_MODELS / "mobilenet_style.onnx"


def _model(nodes, inputs, outputs, initializers=()):
    return lib.make_model(nodes, inputs, outputs, initializers).SerializeToString()


def _relu_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "n"])
    return _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y])


class DlpackOnly:
    """An array that speaks only DLPack, as a torch or JAX array does to a consumer."""

    def __init__(self, array, device=(1, 0)):
        self._array, self._device = array, device

    def __dlpack__(self, stream=None):
        return self._array.__dlpack__()

    def __dlpack_device__(self):
        return self._device


@pytest.fixture(scope="module")
def cnn():
    return fusionopt.InferenceSession(str(SMALL_CNN))


@pytest.fixture(scope="module")
def image():
    return np.random.default_rng(3).standard_normal((2, 3, 32, 32)).astype(np.float32)


def test_run_dlpack_lends_outputs_to_numpy_without_a_copy(cnn, image):
    expected = cnn.run(None, {"input": image})[0]
    (tensor,) = cnn.run_dlpack(None, {"input": image})
    assert isinstance(tensor, fusionopt.Tensor)
    assert (tensor.name, tensor.shape, tensor.dtype, tensor.device) == ("logits", expected.shape, np.float32, "cpu")
    assert tensor.__dlpack_device__() == (1, 0)
    shared = np.from_dlpack(tensor)
    assert shared.ctypes.data == tensor.numpy().ctypes.data  # both views of the tensor's own memory
    np.testing.assert_array_equal(shared, expected)
    assert "logits" in repr(tensor)


def test_a_lent_output_outlives_its_tensor_and_its_session(image):
    session = fusionopt.InferenceSession(str(SMALL_CNN))
    expected = session.run(None, {"input": image})[0].copy()
    (tensor,) = session.run_dlpack(None, {"input": image})
    array = np.from_dlpack(tensor)
    del tensor, session
    gc.collect()
    fusionopt.InferenceSession(str(SMALL_CNN)).run(None, {"input": image * 2})  # reuses freed memory, if any
    np.testing.assert_array_equal(array, expected)


def test_a_dlpack_only_array_is_read_like_numpy(cnn, image):
    expected = cnn.run(None, {"input": image})[0]
    np.testing.assert_array_equal(cnn.run(None, {"input": DlpackOnly(image)})[0], expected)
    # A strided view is made dense first.
    wide = np.zeros((2, 3, 32, 64), np.float32)
    wide[..., ::2] = image
    np.testing.assert_array_equal(cnn.run(None, {"input": DlpackOnly(wide[..., ::2])})[0], expected)


def test_an_output_tensor_feeds_the_next_run():
    session = fusionopt.InferenceSession(_relu_model())
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
    (once,) = session.run_dlpack(None, {"x": x - 1})
    (twice,) = session.run(None, {"x": once})
    np.testing.assert_array_equal(twice, np.maximum(x - 1, 0))


def test_outputs_that_share_memory_are_copied_before_they_are_lent():
    """An output that is a constant of the model (or the same value twice) is copied: writing
    through DLPack must not change what the session computes next."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    weights = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [3]) for name in ("w_out", "y", "y_again")]
    nodes = [helper.make_node("Identity", ["w"], ["w_out"]), helper.make_node("Add", ["x", "w"], ["y"]),
             helper.make_node("Identity", ["y"], ["y_again"])]
    session = fusionopt.InferenceSession(_model(nodes, [x], outputs, [weights]))
    feed = {"x": np.ones(3, np.float32)}
    constant, y, y_again = (np.from_dlpack(t) for t in session.run_dlpack(None, feed))
    # numpy reads legacy DLPack as read-only; torch and CuPy consumers may write: as they would.
    for written in (constant, y):
        ctypes.memset(written.ctypes.data, 0, written.nbytes)
    np.testing.assert_array_equal(y, [0, 0, 0])
    np.testing.assert_array_equal(y_again, [2, 3, 4])
    again = session.run(None, feed)
    np.testing.assert_array_equal(again[0], [1, 2, 3])
    np.testing.assert_array_equal(again[1], [2, 3, 4])


def test_bool_outputs_keep_their_type_through_dlpack():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.BOOL, [4])
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    session = fusionopt.InferenceSession(_model([helper.make_node("Greater", ["x", "zero"], ["y"])], [x], [y], [zero]))
    (tensor,) = session.run_dlpack(None, {"x": np.array([-1, 2, 0, 3], np.float32)})
    array = np.from_dlpack(tensor)
    assert array.dtype == np.bool_
    np.testing.assert_array_equal(array, [False, True, False, True])


def test_device_memory_on_a_cpu_session_is_refused_by_name(cnn, image):
    with pytest.raises(fusionopt.InvalidArgumentError, match="'input' is in CUDA memory; a CPU session reads host"):
        cnn.run(None, {"input": DlpackOnly(image, device=(2, 0))})
    with pytest.raises(fusionopt.InvalidArgumentError, match="DLPack device type 4"):
        cnn.run(None, {"input": DlpackOnly(image, device=(4, 0))})
    # The session is intact afterwards.
    assert cnn.run(None, {"input": image})[0].shape == (2, 100)


def test_the_dlpack_protocol_refuses_copies_and_other_devices(cnn, image):
    (tensor,) = cnn.run_dlpack(None, {"input": image})
    with pytest.raises(BufferError, match="does not copy"):
        tensor.__dlpack__(copy=True)
    with pytest.raises(BufferError, match=r"on cpu; it cannot be exported to device \(2, 0\)"):
        tensor.__dlpack__(dl_device=(2, 0))
    capsule = tensor.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=False)
    del capsule  # an unconsumed capsule releases its reference
    gc.collect()
    np.testing.assert_array_equal(tensor.numpy(), cnn.run(None, {"input": image})[0])


def test_bad_feeds_still_raise_through_run_dlpack(cnn, image):
    with pytest.raises(fusionopt.InvalidModelError, match="'pixels'"):
        cnn.run_dlpack(None, {"pixels": image})
    with pytest.raises(fusionopt.InvalidArgumentError, match="no output named 'probabilities'"):
        cnn.run_dlpack(["probabilities"], {"input": image})


def test_cuda_sessions_take_and_give_device_tensors_through_dlpack():
    """On a GPU machine with torch: scripts/gpu_python_check.py's checks on the small CNN (torch
    CUDA tensors in, the session's device memory out, CUDA Graph replay), against the CPU."""
    if not Path("/dev/nvidia0").exists():
        pytest.skip("no GPU on this machine: the CUDA side of DLPack runs in scripts/gpu_check.sh")
    torch = pytest.importorskip("torch", reason="torch is not installed in this venv")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    sys.path.insert(0, str(lib.REPO_ROOT / "scripts"))
    import gpu_python_check
    verdict, detail = gpu_python_check.check_model(SMALL_CNN)
    assert verdict == "pass", detail

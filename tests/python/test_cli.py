"""The command line: global flags, levels, the default subcommand, --dump, logging."""
import re

import onnx
import pytest

import fusionopt_testlib as lib


@pytest.fixture
def model(tmp_path):
    return lib.save(lib.tiny_model(), tmp_path / "model.onnx")


def test_version(fusionopt):
    rc, stdout, stderr = fusionopt("--version")
    assert rc == lib.EXIT_OK
    version, host = stdout.splitlines()
    assert re.fullmatch(r"fusionopt \d+\.\d+\.\d+", version), stdout
    # The host line names what the CPU runtime will use, so bug reports carry it.
    assert host.startswith("host: ") and "oneDNN " in host and "own kernels " in host, host
    assert stderr == ""


def test_help_describes_subcommands_and_exit_codes(fusionopt):
    rc, stdout, _ = fusionopt("--help")
    assert rc == lib.EXIT_OK
    for word in ["optimize", "inspect", "--version", "--list-passes", "-q", "-v"]:
        assert word in stdout, word
    assert "Exit codes: 0 ok, 1 invalid model, 2 usage, 3 I/O error, 4 unsupported model" in stdout


def test_subcommand_help_lists_its_options(fusionopt):
    rc, stdout, _ = fusionopt("optimize", "--help")
    assert rc == lib.EXIT_OK
    for option in ["--output", "--level", "--external-data", "--external-data-threshold",
                   "--external-data-name", "--dump"]:
        assert option in stdout, option
    rc, stdout, _ = fusionopt("inspect", "--help")
    assert rc == lib.EXIT_OK
    assert "--json" in stdout
    assert "--external-data" not in stdout


def test_quiet_silences_warnings_and_info(fusionopt, tmp_path, model):
    rc, stdout, stderr = fusionopt("-q", model, "-o", tmp_path / "out.onnx", "-O3")
    assert (rc, stdout, stderr) == (lib.EXIT_OK, "", "")
    # Errors still get through.
    missing = tmp_path / "missing.onnx"
    lib.assert_error(fusionopt("-q", missing, "-o", tmp_path / "x.onnx"), lib.EXIT_IO, str(missing))


def test_info_log_reports_the_written_file(fusionopt, tmp_path, model):
    out = tmp_path / "out.onnx"
    rc, _, stderr = fusionopt(model, "-o", out, "-O0")
    assert rc == lib.EXIT_OK
    assert str(out) in stderr
    assert "2 nodes" in stderr


def test_optimize_subcommand_equals_the_default_form(fusionopt, tmp_path, model):
    default_out, explicit_out = tmp_path / "default.onnx", tmp_path / "explicit.onnx"
    assert fusionopt(model, "-o", default_out, "-O0")[0] == lib.EXIT_OK
    assert fusionopt("optimize", model, "-o", explicit_out, "-O0")[0] == lib.EXIT_OK
    lib.assert_same_bytes(explicit_out.read_bytes(), default_out.read_bytes(), "optimize MODEL")
    options_first = tmp_path / "options_first.onnx"
    assert fusionopt("optimize", "-O0", "-o", options_first, model)[0] == lib.EXIT_OK
    lib.assert_same_bytes(options_first.read_bytes(), default_out.read_bytes(), "options before MODEL")


def test_default_form_accepts_options_before_the_model(fusionopt, tmp_path, model):
    out = tmp_path / "out.onnx"
    rc, _, stderr = fusionopt("-O0", "-o", out, model)
    assert rc == lib.EXIT_OK, stderr
    assert onnx.load(str(out)) == onnx.load(str(model))


def test_dump_prints_the_ir(fusionopt, tmp_path, model):
    rc, stdout, stderr = fusionopt(model, "-o", tmp_path / "out.onnx", "-O0", "--dump")
    assert rc == lib.EXIT_OK, stderr
    for word in ["Add", "Relu", "add", "relu", "x", "y"]:
        assert re.search(rf"\b{word}\b", stdout), word
    assert "Conv" not in stdout
    assert (tmp_path / "out.onnx").exists()


def test_dump_shows_every_op_of_a_real_model(fusionopt, tmp_path, project_model):
    rc, stdout, stderr = fusionopt(project_model, "-o", tmp_path / "out.onnx", "-O0", "--dump")
    assert rc == lib.EXIT_OK, stderr
    ops = {node.op_type for node in onnx.load(str(project_model)).graph.node}
    for op in ops:
        assert re.search(rf"\b{op}\b", stdout), op


def test_without_dump_stdout_is_empty(fusionopt, tmp_path, model):
    rc, stdout, _ = fusionopt(model, "-o", tmp_path / "out.onnx", "-O0")
    assert (rc, stdout) == (lib.EXIT_OK, "")


def test_verbosity_does_not_change_the_output(fusionopt, tmp_path, model):
    assert fusionopt(model, "-o", tmp_path / "a.onnx", "-O0")[0] == lib.EXIT_OK
    rc, _, verbose = fusionopt("-vv", model, "-o", tmp_path / "b.onnx", "-O0")
    assert rc == lib.EXIT_OK, verbose
    lib.assert_same_bytes((tmp_path / "b.onnx").read_bytes(), (tmp_path / "a.onnx").read_bytes(), "-vv")


def test_folders_named_by_options_are_created(fusionopt, tmp_path, project_model):
    """--output-dir (run) and --dump-dir (optimize) name folders: new ones are made, nested too.
    A path that exists as a file is an I/O error naming it. (-o FILE into a missing folder stays an
    error: a typo in an output path should not scatter folders; README.)"""
    outputs = tmp_path / "new" / "outputs"
    rc, _, stderr = fusionopt("run", project_model, "--output-dir", outputs)
    assert rc == lib.EXIT_OK, stderr
    assert sorted(path.name for path in outputs.iterdir())[0] == "output_0.pb"
    dumps = tmp_path / "new" / "dumps"
    rc, _, stderr = fusionopt(project_model, "-O2", "-o", tmp_path / "out.onnx", "--dump-after", "all", "--dump-dir", dumps)
    assert rc == lib.EXIT_OK, stderr
    assert any(path.suffix == ".ir" for path in dumps.iterdir())
    a_file = tmp_path / "file"
    a_file.write_text("")
    lib.assert_error(fusionopt("run", project_model, "--output-dir", a_file), lib.EXIT_IO, str(a_file),
                     "exists and is not a folder")

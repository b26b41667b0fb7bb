"""The optimizer's command line: --list-passes, --only/--disable, --pass-option, --report,
--dump-after, --check-each-pass and the summary table."""
import json

import onnx
import pytest

import fusionopt_testlib as lib


@pytest.fixture
def model(tmp_path):
    return lib.save(lib.tiny_model(), tmp_path / "model.onnx")


def listed_passes(fusionopt):
    rc, stdout, stderr = fusionopt("--list-passes")
    assert (rc, stderr) == (lib.EXIT_OK, "")
    lines = stdout.splitlines()
    assert lines[0] == "name\tlevel\tsummary"
    rows = [line.split("\t") for line in lines[1:]]
    assert all(len(row) == 3 and row[1] in ("O1", "O2", "O3", "--runtime ort") and row[2] for row in rows), rows
    return {row[0]: row[1] for row in rows}


def test_list_passes_names_every_pass_with_its_level(fusionopt):
    passes = listed_passes(fusionopt)
    assert passes["eliminate-dead-code"] == "O1"
    assert passes["lower-for-ort"] == "--runtime ort"  # a conversion: every level, under --runtime ort
    assert len(passes) == len(set(passes))


def test_list_passes_verbose_prints_each_rewrite(fusionopt):
    """--list-passes --verbose: each pass's line, then its rewrite (the header's, before -> after)
    indented by four spaces, then a blank line; the lines scripts parse are unchanged."""
    rc, stdout, stderr = fusionopt("--list-passes", "--verbose")
    assert (rc, stderr) == (lib.EXIT_OK, "")
    blocks = stdout.split("\n\n")
    header, first = blocks[0].split("\n", 1)
    assert header == "name\tlevel\tsummary"
    blocks[0] = first
    passes = {}
    for block in filter(None, blocks):
        line, *rewrite = block.split("\n")
        passes[line.split("\t")[0]] = rewrite
    assert set(passes) == set(listed_passes(fusionopt))
    for name, rewrite in passes.items():
        assert 2 <= len(rewrite) <= 11 and all(line.startswith("    ") for line in rewrite), (name, rewrite)
        assert any("\u2192" in line for line in rewrite), name
    assert any("Exp" in line or "Relu" in line for line in passes["eliminate-dead-code"])


@pytest.mark.parametrize("level", ["-O0", "-O2"])
def test_runtime_ort_ends_the_pipeline_with_its_conversion_pass(fusionopt, tmp_path, model, level):
    """lower-for-ort is a registered pass: it runs last under --runtime ort at any level, with
    its statistics in the report, --check-each-pass and --dump-after; without --runtime ort it
    does not run, and --only / --disable cannot name it."""
    out, report, dumps = tmp_path / "out.onnx", tmp_path / "report.json", tmp_path / "dumps"
    rc, _, stderr = fusionopt(model, level, "--runtime", "ort", "-o", out, "--report", report, "--check-each-pass",
                              "--dump-after", "lower-for-ort", "--dump-dir", dumps)
    assert rc == lib.EXIT_OK, stderr
    document = json.loads(report.read_text())
    run = [entry["pass"] for entry in document["passes"]]
    assert run[-1] == "lower-for-ort" and run.count("lower-for-ort") == 1, run
    kept = [] if level == "-O0" else [{"node": "FusedElementwise_Add_Relu", "function": "ai.fusionopt::FusedElementwise_Add_Relu",
                                       "reason": "ORT has no kernel for this group (it inlines the function)"}]
    assert document["ort_lowering"] == {"lowered": [], "kept": kept}
    assert document["passes"][-1]["rejections"] == (
        {} if level == "-O0" else {kept[0]["reason"]: {"count": 1, "examples": ["FusedElementwise_Add_Relu"]}})
    assert [path.name for path in dumps.iterdir() if path.name != "00-input.ir"] == [f"{len(run):02d}-lower-for-ort.ir"]

    rc, _, stderr = fusionopt(model, level, "-o", out, "--report", report)
    assert rc == lib.EXIT_OK, stderr
    document = json.loads(report.read_text())
    assert "lower-for-ort" not in [entry["pass"] for entry in document["passes"]] and "ort_lowering" not in document

    for flag in ("--only", "--disable"):
        rc, _, stderr = fusionopt(model, level, "--runtime", "ort", flag, "lower-for-ort", "-o", out)
        assert rc == lib.EXIT_USAGE
        assert f"{flag} names 'lower-for-ort', the conversion --runtime ort ends with" in stderr


@pytest.mark.parametrize("level", ["-O1", "-O2", "-O3"])
def test_every_level_writes_a_valid_model_and_a_summary(fusionopt, tmp_path, model, level):
    out = tmp_path / "out.onnx"
    rc, stdout, stderr = fusionopt(model, "-o", out, level, "--check-each-pass")
    assert rc == lib.EXIT_OK, stderr
    assert stdout == ""
    onnx.checker.check_model(str(out), full_check=True)
    assert "estimated kernel launches" in stderr and "before" in stderr and "after" in stderr
    assert all(line.startswith(("info: ", "warning: ")) for line in stderr.splitlines()), stderr
    assert fusionopt("verify", model, out, "-q")[0] == lib.EXIT_OK


def test_report_lists_every_pass_run(fusionopt, tmp_path, model):
    report = tmp_path / "report.json"
    rc, _, stderr = fusionopt(model, "-o", tmp_path / "out.onnx", "-O2", "--report", report)
    assert rc == lib.EXIT_OK, stderr
    document = json.loads(report.read_text())
    assert [entry["pass"] for entry in document["passes"]]
    for entry in document["passes"]:
        assert set(entry) >= {"pass", "changed", "matches", "rejections", "counters", "nodes_before",
                              "nodes_after", "milliseconds"}
    assert isinstance(document["fusions"], list)


def test_only_and_disable_select_passes(fusionopt, tmp_path, model):
    report = tmp_path / "report.json"
    assert fusionopt(model, "-o", tmp_path / "a.onnx", "-O2", "--only", "eliminate-dead-code",
                     "--report", report)[0] == lib.EXIT_OK
    assert {entry["pass"] for entry in json.loads(report.read_text())["passes"]} == {"eliminate-dead-code"}
    assert fusionopt(model, "-o", tmp_path / "b.onnx", "-O2", "--disable", "eliminate-dead-code",
                     "--report", report)[0] == lib.EXIT_OK
    assert "eliminate-dead-code" not in {entry["pass"] for entry in json.loads(report.read_text())["passes"]}


@pytest.mark.parametrize("args, message", [
    (["--only", "no-such-pass"], "--only names 'no-such-pass', which is not a pass"),
    (["--disable", "nope"], "--disable names 'nope', which is not a pass"),
    (["--pass-option", "eliminate-dead-code"], "is not PASS.NAME=VALUE"),
    (["--pass-option", "eliminate-dead-code.nope=1"], "has no option 'nope'"),
    (["--dump-after", "all"], "--dump-after needs --dump-dir"),
])
def test_bad_pass_selection_is_a_usage_error_and_writes_nothing(fusionopt, tmp_path, model, args, message):
    out = tmp_path / "out.onnx"
    lib.assert_error(fusionopt(model, "-o", out, "-O2", *args), lib.EXIT_USAGE, str(model), message)
    assert not out.exists()


def test_dump_after_all_writes_the_ir_after_each_pass(fusionopt, tmp_path, model):
    dump_dir = tmp_path / "dumps"
    rc, _, stderr = fusionopt(model, "-o", tmp_path / "out.onnx", "-O2", "--dump-after", "all",
                              "--dump-dir", dump_dir)
    assert rc == lib.EXIT_OK, stderr
    files = sorted(path.name for path in dump_dir.iterdir())
    assert files[0] == "00-input.ir"
    assert len(files) == 1 + len(listed_passes_run(fusionopt, model, tmp_path))
    assert all(path.read_text().startswith("ir_version") for path in dump_dir.iterdir())


def listed_passes_run(fusionopt, model, tmp_path):
    report = tmp_path / "count.json"
    assert fusionopt(model, "-o", tmp_path / "count.onnx", "-O2", "--report", report)[0] == lib.EXIT_OK
    return json.loads(report.read_text())["passes"]


def test_selection_never_runs_a_pass_twice_in_a_row(fusionopt, tmp_path, model):
    report = tmp_path / "report.json"
    assert fusionopt(model, "-o", tmp_path / "out.onnx", "-O2", "--only", "fuse-elementwise", "--only",
                     "eliminate-dead-code", "--report", report)[0] == lib.EXIT_OK
    names = [entry["pass"] for entry in json.loads(report.read_text())["passes"]]
    assert names and all(a != b for a, b in zip(names, names[1:])), names


def horizontal_groups(fusionopt, tmp_path, *flags):
    """Sizes of the horizontal contraction groups -O3 forms on models/bert_style.onnx."""
    path = lib.PROJECT_MODELS / "bert_style.onnx"
    if not path.is_file():
        pytest.skip("models/bert_style.onnx has not been generated")
    report = tmp_path / "report.json"
    rc, _, stderr = fusionopt(path, "-o", tmp_path / "out.onnx", "-O3", "--report", report, *flags)
    assert rc == lib.EXIT_OK, stderr
    fusions = json.loads(report.read_text())["fusions"]
    return sorted(sum(1 for name in f["replaced"] if name.endswith("MatMul"))
                  for f in fusions if f["kind"] == "horizontal_MatMul")


def test_max_horizontal_caps_both_horizontal_passes(fusionopt, tmp_path):
    # Two layers, Q/K/V each: three projections per group by default, two under the cap.
    assert horizontal_groups(fusionopt, tmp_path) == [3, 3]
    assert horizontal_groups(fusionopt, tmp_path, "--max-horizontal", "2") == [2, 2]
    # An explicit --pass-option wins over the shorthand.
    assert horizontal_groups(fusionopt, tmp_path, "--max-horizontal", "2", "--pass-option",
                             "fuse-horizontal-contractions.max_members=3") == [3, 3]


@pytest.mark.parametrize("value", ["1", "x"])
def test_max_horizontal_below_two_is_a_usage_error(fusionopt, tmp_path, model, value):
    out = tmp_path / "out.onnx"
    rc, _, stderr = fusionopt(model, "-o", out, "-O3", "--max-horizontal", value)
    assert rc == lib.EXIT_USAGE and "--max-horizontal" in stderr
    assert not out.exists()

"""One way to ship a Python-backend model: self-contained model.py files, and the rules of inlining."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from orinkit.lanes.postprocess import PostprocessOptions, postprocess_batch
from orinkit.repo.check import _imports as unguarded_imports
from orinkit.repo.python_model import PythonModelSpec, VendoringError, add_python_model, model_source
from orinkit.repo.signature import Signature, TensorSpec

SHIPPED = ["orinkit.lanes.triton_postprocess", "orinkit.repo.pymodels.onnxruntime_runner",
           "orinkit.repo.pymodels.torchscript_runner", "orinkit.repo.pymodels.topk",
           "orinkit.repo.pymodels.image_preprocess", "orinkit.repo.pymodels.bls_chain"]




@pytest.mark.parametrize("module", SHIPPED)
def test_every_shipped_model_needs_no_orinkit(module):
    text = model_source(module)
    imports = unguarded_imports(text)
    assert "orinkit" not in imports
    assert imports <= {"__future__", "json", "os", "io", "math", "dataclasses", "numpy", "PIL", "warnings",
                       "triton_python_backend_utils", "onnxruntime", "torch", "collections"}, imports
    assert "class TritonPythonModel" in text


def _hidden_orinkit(tmp_path):
    hidden = tmp_path / "hidden"
    (hidden / "orinkit").mkdir(parents=True)
    (hidden / "orinkit" / "__init__.py").write_text("raise ImportError('orinkit is hidden in this test')\n")
    return hidden


def test_the_lane_postprocessing_runs_where_orinkit_cannot_be_imported(tmp_path):
    """The written model.py, loaded by a Python where orinkit does not import, gives what orinkit's own
    post-processing gives, and bad input still raises a ValueError there."""
    (tmp_path / "model.py").write_text(model_source("orinkit.lanes.triton_postprocess"))
    rng = np.random.default_rng(0)
    proposals = rng.normal(size=(2, 40, 77)).astype(np.float32)
    proposals[..., 5:] = rng.uniform(0, 640, size=(2, 40, 72))
    proposals[..., 4] = rng.uniform(10, 70, size=(2, 40))
    sizes = np.array([[720, 1280], [590, 1640]], dtype=np.int32)
    np.save(tmp_path / "proposals.npy", proposals)
    np.save(tmp_path / "sizes.npy", sizes)
    script = textwrap.dedent("""
        import json, sys
        import numpy as np
        try:
            import orinkit.lanes
        except ImportError:
            pass
        else:
            raise SystemExit("orinkit is importable: the test proves nothing")
        sys.path.insert(0, sys.argv[1])
        import model
        options = model.options_from_parameters({"conf_threshold": {"string_value": "0.2"},
                                                 "top_k": {"string_value": "4"}})
        points, scores, counts = model.postprocess_batch(np.load(sys.argv[1] + "/proposals.npy"),
                                                         np.load(sys.argv[1] + "/sizes.npy"), options)
        np.save(sys.argv[1] + "/points.npy", points)
        try:
            model.PostprocessOptions(conf_threshold=2.0)
        except ValueError as exc:
            print(json.dumps({"error": type(exc).__name__, "counts": counts.tolist()}))
    """)
    env = {"PYTHONPATH": str(_hidden_orinkit(tmp_path)), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, env=env,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    expected_points, _, expected_counts = postprocess_batch(proposals, sizes,
                                                            PostprocessOptions(conf_threshold=0.2, top_k=4))
    assert report == {"error": "LaneInputError", "counts": expected_counts.tolist()}
    assert sum(report["counts"]) > 0
    np.testing.assert_array_equal(np.load(tmp_path / "points.npy"), expected_points)


def test_the_spec_writes_config_and_model_together(tmp_path):
    spec = PythonModelSpec("orinkit.repo.pymodels.topk",
                           Signature((TensorSpec("LOGITS", "FP32", (10,)),),
                                     (TensorSpec("SCORES", "FP32", (3,)), TensorSpec("CLASS_IDS", "INT32", (3,))), 4),
                           {"k": "3", "softmax": "true"})
    placed = add_python_model(tmp_path, spec, name="top3")
    assert placed.config.backend == "python" and placed.config.max_batch_size == 4
    assert {k: v.string_value for k, v in placed.config.parameters.items()} == {"k": "3", "softmax": "true"}
    assert (tmp_path / "top3" / "1" / "model.py").read_text() == model_source("orinkit.repo.pymodels.topk")
    assert (tmp_path / "top3" / "config.pbtxt").is_file()


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A throwaway package ``vendortest`` to inline from (the rules are the same as for orinkit's)."""
    root = tmp_path / "vendortest"
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, text: str) -> str:
        (root / f"{name}.py").write_text(textwrap.dedent(text))
        for key in [k for k in sys.modules if k.startswith("vendortest")]:
            del sys.modules[key]
        return f"vendortest.{name}"

    yield write
    for key in [k for k in sys.modules if k.startswith("vendortest")]:
        del sys.modules[key]


def test_inlining_is_recursive_ordered_and_keeps_aliases(package):
    package("base", '"""Base."""\nfrom __future__ import annotations\n\nSCALE = 2\n')
    package("helper", "from vendortest.base import SCALE\n\ndef double(x):\n    return x * SCALE\n")
    main = package("main", '"""The model."""\nfrom vendortest.helper import double as twice\n\n'
                           "class TritonPythonModel:\n    pass\n\nRESULT = twice(21)\n")
    text = model_source(main, inline="vendortest")
    namespace: dict = {}
    exec(compile(text, "model.py", "exec"), namespace)  # noqa: S102 - the generated source is what is under test
    assert namespace["RESULT"] == 42
    assert text.index("SCALE = 2") < text.index("def double") < text.index("class TritonPythonModel")
    assert text.startswith('"""The model.') and "from __future__ import annotations" in text
    assert "vendortest" not in "".join(line for line in text.splitlines() if not line.startswith("#"))


def test_inlining_refuses_a_name_defined_twice(package):
    package("helper", "def scale(x):\n    return x\n")
    main = package("main", "from vendortest.helper import scale\n\ndef scale(x):\n    return 2 * x\n")
    with pytest.raises(VendoringError, match="scale"):
        model_source(main, inline="vendortest")


def test_inlining_refuses_an_import_that_would_run_in_the_server(package):
    package("helper", "X = 1\n")
    main = package("main", "def f():\n    from vendortest.helper import X\n    return X\n")
    with pytest.raises(VendoringError, match="line 2"):
        model_source(main, inline="vendortest")
    guarded = package("guarded", "try:\n    from vendortest.helper import X\nexcept ImportError:\n    X = 2\n")
    assert "from vendortest.helper import X" in model_source(guarded, inline="vendortest")


def test_inlining_refuses_a_cycle(package):
    package("a", "from vendortest.b import B\nA = 1\n")
    package("b", "from vendortest.a import A\nB = 1\n")
    with pytest.raises(VendoringError, match="import each other"):
        model_source("vendortest.a", inline="vendortest")

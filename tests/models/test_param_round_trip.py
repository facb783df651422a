"""Parameters come back in a fresh process, whatever instances it made first.

The parent perturbs every model's parameters and buffers, then writes them three ways: Pyro's
parameter store (``pyro.get_param_store().save``), ``save_params``, and a plain ``torch.save`` of
the ``state_dict``, which is the record the child compares with. The child first makes other
instances of every class (so that the default Pyro names differ from the parent's), then loads.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyro
import pytest
import torch
from factories import FACTORIES

from ppl_models.inference.params import PARAMS_FORMAT

TESTS = Path(__file__).resolve().parents[1]  # the tests' root: factories.py
CHILD = """
import json, sys
import pyro, torch
from factories import FACTORIES

folder = sys.argv[1]
classes = {cls.__name__: cls for cls in FACTORIES}
for factory in FACTORIES.values():  # other instances first: every default Pyro name moves on
    factory()
report = {}
for name, saved_name in json.load(open(f"{folder}/names.json")).items():
    record = torch.load(f"{folder}/{name}.state.pt", weights_only=True)
    params = {n for n, p in FACTORIES[classes[name]]()[0].named_parameters() if p.requires_grad}
    result = {}
    for kind in ("store", "params", "state"):
        model = FACTORIES[classes[name]]()[0]
        if model.pyro_name == saved_name:  # the same count as the parent's by chance: one more
            model = FACTORIES[classes[name]]()[0]
        result["default_name_differs"] = model.pyro_name != saved_name
        model.load_params(f"{folder}/{name}.{kind}.pt")  # the store file: matched by the relative names
        loaded = model.state_dict()
        names = params if kind == "store" else set(record)
        result[kind] = sorted(n for n in names if not torch.equal(loaded[n], record[n]))
    pyro.clear_param_store()  # Pyro's own recipe: the store file, the saved name, update_module_params
    pyro.get_param_store().load(f"{folder}/{name}.store.pt")
    model = FACTORIES[classes[name]]()[0]
    model.pyro_name = saved_name
    pyro.module(model.pyro_name, model, update_module_params=True)
    result["pyro_recipe"] = sorted(n for n, p in model.named_parameters() if n in params
                                   and not torch.equal(p.detach(), record[n]))
    report[name] = result
print(json.dumps(report))
"""


def _perturbed(cls):
    model, _ = FACTORIES[cls]()
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.1 * torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype))
    return model


def test_every_model_reloads_its_parameters_in_a_fresh_process(tmp_path):
    pyro.clear_param_store()
    names = {}
    for cls in FACTORIES:
        model = _perturbed(cls)
        names[cls.__name__] = model.pyro_name
        pyro.clear_param_store()
        pyro.module(model.pyro_name, model)
        pyro.get_param_store().save(tmp_path / f"{cls.__name__}.store.pt")
        model.save_params(tmp_path / f"{cls.__name__}.params.pt")
        torch.save(model.state_dict(), tmp_path / f"{cls.__name__}.state.pt")
    (tmp_path / "names.json").write_text(json.dumps(names))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, env=env, cwd=TESTS, timeout=120
    )
    assert child.returncode == 0, child.stderr[-2000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert set(report) == set(names)
    for name, result in report.items():
        assert result["default_name_differs"], name
        for kind in ("store", "params", "state", "pyro_recipe"):
            assert result[kind] == [], f"{name}: {kind} left {result[kind]} unrestored"


def test_a_store_file_of_other_models_is_refused_not_ignored(tmp_path):
    pyro.clear_param_store()
    lgssm = _perturbed(next(cls for cls in FACTORIES if cls.__name__ == "LinearGaussianSSM"))
    pyro.module(lgssm.pyro_name, lgssm)
    pyro.get_param_store().save(tmp_path / "store.pt")
    srnn, _ = FACTORIES[next(cls for cls in FACTORIES if cls.__name__ == "SRNN")]()
    before = {n: v.clone() for n, v in srnn.state_dict().items()}
    with pytest.raises(ValueError, match="none holds exactly the .* parameters of this SRNN"):
        srnn.load_params(tmp_path / "store.pt")
    with pytest.raises(ValueError, match="no parameters under the Pyro name 'elsewhere'"):
        srnn.load_params(tmp_path / "store.pt", name="elsewhere")
    assert all(torch.equal(before[n], v) for n, v in srnn.state_dict().items())  # nothing half-loaded


def test_two_matching_models_in_one_store_file_need_a_name(tmp_path):
    pyro.clear_param_store()
    cls = next(cls for cls in FACTORIES if cls.__name__ == "LinearGaussianSSM")
    first, second = _perturbed(cls), _perturbed(cls)
    with torch.no_grad():
        second.A.add_(1.0)
    for model in (first, second):
        pyro.module(model.pyro_name, model)
    pyro.get_param_store().save(tmp_path / "store.pt")
    fresh, _ = FACTORIES[cls]()
    with pytest.raises(ValueError, match="several .* match: pass name="):
        fresh.load_params(tmp_path / "store.pt")
    fresh.load_params(tmp_path / "store.pt", name=second.pyro_name)
    assert torch.equal(fresh.A, second.A)


def test_loading_points_the_store_at_the_loaded_tensors_so_svi_goes_on_from_them(tmp_path):
    """After Pyro's store.load under the model's own name, the store's entries are the module's parameters."""
    pyro.clear_param_store()
    cls = next(cls for cls in FACTORIES if cls.__name__ == "LinearGaussianSSM")
    model = _perturbed(cls)
    model.save_params(tmp_path / "params.pt")
    pyro.module(model.pyro_name, model)
    pyro.get_param_store().save(tmp_path / "store.pt")
    pyro.get_param_store().load(tmp_path / "store.pt")  # the store now holds copies, not the module's tensors
    assert pyro.param(f"{model.pyro_name}$$$A") is not model.A
    model.load_params(tmp_path / "params.pt")
    assert pyro.param(f"{model.pyro_name}$$$A") is model.A


def test_save_params_writes_names_relative_to_the_model(tmp_path):
    cls = next(cls for cls in FACTORIES if cls.__name__ == "VRNN")
    model, _ = FACTORIES[cls]()
    model.pyro_name = "my_vrnn"
    content = torch.load(model.save_params(tmp_path / "p.pt"), weights_only=True)
    assert content["format"] == PARAMS_FORMAT and content["pyro_name"] == "my_vrnn"
    assert set(content["state_dict"]) == set(model.state_dict())


@pytest.mark.parametrize("bad", ["", "a$$$b", 3])
def test_pyro_name_refuses_what_the_store_cannot_hold(bad):
    model, _ = FACTORIES[next(iter(FACTORIES))]()
    with pytest.raises(ValueError, match="pyro_name"):
        model.pyro_name = bad


def test_unreadable_and_foreign_files_are_refused_with_their_name(tmp_path):
    model, _ = FACTORIES[next(iter(FACTORIES))]()
    (tmp_path / "junk.pt").write_text("not a torch file")
    with pytest.raises(ValueError, match="junk.pt is not a readable parameter file"):
        model.load_params(tmp_path / "junk.pt")
    torch.save({"epoch": 3}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="other.pt holds no parameters"):
        model.load_params(tmp_path / "other.pt")
    with pytest.raises(FileNotFoundError):
        model.load_params(tmp_path / "missing.pt")

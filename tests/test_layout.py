"""Packaging: one import root, `models`/`solvers` never importable top-level."""

import subprocess
import sys


def test_no_top_level_models_or_solvers(tmp_path):
    code = (
        "import importlib.util, sys\n"
        "import elasticopt, elasticopt.models, elasticopt.solvers\n"
        "assert importlib.util.find_spec('models') is None, 'top-level models importable'\n"
        "assert importlib.util.find_spec('solvers') is None, 'top-level solvers importable'\n"
        "assert 'models' not in sys.modules and 'solvers' not in sys.modules\n"
        "assert elasticopt.models.__name__ == 'elasticopt.models'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_in_process_modules_are_namespaced():
    import elasticopt  # noqa: F401

    assert "models" not in sys.modules
    assert "solvers" not in sys.modules


def test_public_surface():
    import elasticopt

    for name in ("solve", "load_instance", "save_instance", "available_solvers", "verify", "Problem", "Solution"):
        assert name in elasticopt.__all__
        assert hasattr(elasticopt, name)
    assert {"dp", "numpy-dp"} <= set(elasticopt.available_solvers())


def test_unknown_solver_lists_registered_and_installed():
    import pytest

    import elasticopt
    from elasticopt.errors import UnknownSolverError

    p = elasticopt.load_instance("instances/tiny.json")
    with pytest.raises(UnknownSolverError) as ei:
        elasticopt.solve(p, "no-such-solver")
    msg = str(ei.value)
    assert "no-such-solver" in msg and "dp" in msg and "numpy-dp" in msg and "installed here" in msg

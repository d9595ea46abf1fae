"""The base package works without the 'service' extra; serve says how to install it."""

from __future__ import annotations

import subprocess
import sys

BLOCK = "import sys\nfor m in ('starlette', 'uvicorn', 'fastjsonschema'):\n    sys.modules[m] = None\n"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True, timeout=300)


def test_package_cli_and_service_import_without_the_extra():
    out = _run("import elasticopt, elasticopt.cli, elasticopt.service, elasticopt.integrations.pollux\n"
               "elasticopt.cli.build_parser()\nprint('ok')")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_serve_without_the_extra_is_a_clear_error():
    for mode in ("--http", "--stdio"):
        out = _run(f"import elasticopt.cli\nsys.exit(elasticopt.cli.main(['serve', '{mode}', '--no-warm-up']))")
        assert out.returncode == 2, (mode, out.stderr)
        assert "pip install 'elasticopt[service]'" in out.stderr and "Traceback" not in out.stderr, out.stderr

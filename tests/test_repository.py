"""The repository stands on its own (issue 16): nothing points outside it, CI runs the README's
test command with the public data, and the design is cited from docs/design.md."""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", ".hypothesis", ".pytest_cache", "__pycache__", "bench-results", "build", "dist", "out",
             ".venv", "venv"}
TEXT = {".py", ".md", ".toml", ".json", ".txt", ".cfg", ".yml", ".yaml", ".sh", ".csv", ""}


def repository_files() -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for f in filenames:
            p = Path(dirpath, f)
            if f != ".git" and p.suffix in TEXT and p.stat().st_size < 2_000_000:
                out.append(p)
    return out


def readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("run the tests"):]
    return re.search(r"```bash\n(.*?)\n```", section, re.S).group(1).strip()


def _escapes(p: Path, rel: str) -> bool:
    """Whether ``rel`` (``../x``), read from p's folder and from the root, leaves the repository."""
    return all(not (base / rel).resolve().is_relative_to(ROOT) for base in (p.parent, ROOT))


def test_nothing_points_outside_the_repository():
    # the folder holding this checkout (a machine path), home folders, and ../ paths that climb out;
    # only .ci/run may name the data beside the clone (that is CI's layout)
    # (not where the checkout's folder is the shared temporary one: a clone at /tmp/elasticopt would flag the
    # docs' example paths such as /tmp/h10k.json)
    shared = {Path(tempfile.gettempdir()).resolve(), Path("/tmp").resolve()}
    machine = (re.escape(str(ROOT.parent).rstrip("/") + "/")
               if ROOT.parent != ROOT.parent.parent and ROOT.parent.resolve() not in shared else None)
    absolute = re.compile((machine + "|" if machine else "") + r"(?<![\w.])/(?:home|Users)/\w")
    relative = re.compile(r"(?<![\w/.])((?:\.\./)+[\w.-]+)")
    hits = []
    for p in repository_files():
        rel = p.relative_to(ROOT).as_posix()
        if rel == ".ci/run":
            continue
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if absolute.search(line) or any(_escapes(p, m) for m in relative.findall(line)):
                hits.append(f"{rel}:{n}: {line.strip()[:120]}")
    assert not hits, "\n".join(hits)


def test_the_outside_check_sees_what_it_should(tmp_path):
    readme = ROOT / "README.md"
    assert _escapes(readme, "../shared/data")
    assert not _escapes(ROOT / "docs" / "guides" / "own-data.md", "../design.md")


def test_design_is_cited_from_docs():
    assert (ROOT / "docs" / "design.md").is_file()
    hits = [p for p in repository_files() if "DESIGN §" in p.read_text(errors="replace")
            and not p.relative_to(ROOT).as_posix().startswith("docs/") and p.name != "test_repository.py"]
    assert not hits, hits


def test_ci_runs_the_readme_test_command_with_the_data():
    ci = (ROOT / ".ci" / "run").read_text()
    command = readme_test_command()
    assert command == "pip install -e '.[all]' && python -m pytest"
    lines = [line.strip() for line in ci.splitlines()]
    assert lines[-1] == command  # verbatim, last
    assert lines.index("python -m pip install -q torch==2.13.0") < lines.index(command)  # torch first
    assert any(line.startswith('rm -rf "$VENV"') for line in lines)  # a fresh venv
    assert any(line.startswith("python3 -m venv") for line in lines)
    assert any(line.startswith("export ELASTICOPT_DATA=") for line in lines)
    assert any(line.startswith("export CI=") for line in lines)


def test_data_test_fails_on_ci_without_the_data():
    env = {k: v for k, v in os.environ.items() if k != "ELASTICOPT_DATA"}
    env["CI"] = "true"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_profiles.py",
                        "-k", "committed_profiles_match_a_refit"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 1, r.stdout[-2000:]
    assert "1 failed" in r.stdout and "ELASTICOPT_DATA is not set" in r.stdout

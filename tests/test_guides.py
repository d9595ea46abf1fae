"""docs/guides: every fenced python block runs (issue 16), in a fresh process per guide, in order."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDES = sorted((ROOT / "docs" / "guides").glob("*.md"))
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(path: Path) -> list[str]:
    return FENCE.findall(path.read_text())


def test_the_three_guides_exist():
    assert {g.name for g in GUIDES} >= {"own-policy.md", "own-solver.md", "own-data.md"}


def test_block_extraction():
    text = "x\n```python\na = 1\n```\n```bash\nls\n```\n```python\nb = a + 1\n```\n"
    p = Path(ROOT / "docs" / "guides")  # only the regex is under test here
    assert FENCE.findall(text) == ["a = 1\n", "b = a + 1\n"] and p.exists()


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_guide_code_runs(guide, tmp_path):
    blocks = python_blocks(guide)
    assert blocks, f"{guide.name} has no python block"
    # one script, blocks in order, each announced so a failure names its block
    script = "\n".join(f"print('--- block {i + 1}', flush=True)\n{b}" for i, b in enumerate(blocks))
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{guide.name}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    assert r.stdout.count("--- block") == len(blocks)

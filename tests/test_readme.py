"""README (issue 16): its Python block runs, every command it shows parses with the real CLI,
every script it names exists and answers --help, and the synopsis names only real options."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from elasticopt.cli import SUBCOMMANDS, build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def fenced(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    out, lang, body = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                out.append((lang, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    return out


def blocks(lang: str) -> list[str]:
    return [body for tag, body in fenced(README) if tag == lang]


def commands() -> list[list[str]]:
    """Every command line of the README's bash blocks (split at &&, comments dropped)."""
    out = []
    for block in blocks("bash"):
        for line in block.splitlines():
            for part in line.split("#")[0].split("&&"):
                if part.strip():
                    out.append(shlex.split(part.strip()))
    return out


def test_fence_parser():
    assert fenced("a\n```bash\nls\n```\ntext\n```\nx y\n```\n") == [("bash", "ls\n"), ("", "x y\n")]


def test_python_block_runs(capsys):
    (code,) = blocks("python")
    exec(compile(code, "README.md", "exec"), {})
    assert "OPTIMAL" in capsys.readouterr().out


def test_commands_are_known():
    progs = {argv[0] for argv in commands()}
    assert progs <= {"pip", "python", "elasticopt"}, progs
    assert any(argv[:2] == ["elasticopt", "bench"] for argv in commands())


@pytest.mark.parametrize("argv", [a for a in commands() if a[0] == "elasticopt"], ids=shlex.join)
def test_elasticopt_commands_parse(argv):
    args = build_parser().parse_args(argv[1:])
    assert callable(args.func)


@pytest.mark.parametrize("argv", [a for a in commands() if a[0] == "python" and a[1].endswith(".py")], ids=shlex.join)
def test_scripts_exist_and_answer_help(argv):
    script = ROOT / argv[1]
    assert script.is_file(), argv[1]
    r = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage" in r.stdout.lower()


def test_pip_commands_name_real_extras():
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for argv in commands():
        if argv[0] == "pip":
            for spec in re.findall(r"\.\[([\w,]+)\]", " ".join(argv)):
                assert set(spec.split(",")) <= extras, spec


def test_synopsis_names_only_real_subcommands_and_options():
    synopsis = next(b for b in blocks("") if b.startswith("elasticopt"))
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    top_flags = {s for a in parser._actions for s in a.option_strings}
    seen = set()
    for line in synopsis.splitlines():
        words = line.split()
        name = words[1]
        if name.startswith("["):  # the top-level line: elasticopt [-v|-q] COMMAND ...
            for flag in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line):
                assert flag in top_flags, flag
            continue
        assert name in sub, name
        seen.add(name)
        flags = {s for a in sub[name]._actions for s in a.option_strings}
        for flag in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", " ".join(words[2:])):
            assert flag in flags, f"README synopsis: elasticopt {name} has no {flag}"
    assert seen == set(SUBCOMMANDS), f"README synopsis lacks {sorted(set(SUBCOMMANDS) - seen)}"

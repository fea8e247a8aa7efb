"""Every section the repository cites exists, and the code cites only the project's own docs.

Scanned: code, scripts, terraform, YAML/TOML, Dockerfiles, the README, CHANGELOG and docs/.
- A path reference `docs/<page>.md#<section>` (anywhere: a comment, a docstring, a message)
  must name an existing page under docs/ and a section of it;
- a markdown link `[text](<path>.md#<section>)` or `[text](#<section>)` is resolved from the
  file that holds it and must name an existing page and section; any other relative link
  must name an existing file or folder;
- a section is a heading's GitHub slug (lower case, punctuation dropped, spaces to hyphens,
  `-1`, `-2` for repeats; headings in fenced code do not count) or an explicit
  `<a id="...">`;
- nothing cites the design handbook that lives outside the repository (its file name, or
  "DESIGN" followed by a section number);
- every `pipeline <command> [<subcommand>] [--option]` written in code in the README or
  docs/ (a code span or a fenced block) is a command of the CLI, with that option.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]

SCANNED_SUFFIXES = {".py", ".md", ".sh", ".tf", ".yaml", ".yml", ".toml", ".example"}
SKIPPED_DIRS = {".git", ".venv", "venv", "mutants", "build", "node_modules", "__pycache__"}
SKIPPED_DIRS |= {".local-stack", ".pytest_cache", ".ruff_cache", ".hypothesis", ".terraform"}
SKIPPED_DIRS |= {"fixtures"}  # recorded payloads, not prose

PATH_REF = re.compile(r"(?<![\w./-])docs/([\w./-]+?\.md)#([\w-]+)")
MD_LINK = re.compile(r"\]\(([^)\s]*)\)")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=[\"']([^\"']+)[\"']")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# Built in two parts so that this file does not match itself.
OUTSIDE_DESIGN = re.compile("DESIGN" + r"(?:\.md|\s+(?:section\s+)?\d)")


@dataclass(frozen=True)
class Problem:
    """One broken reference: where it is and what is wrong."""

    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def scanned_files(root: Path) -> Iterator[Path]:
    """The repository's text files that may cite docs: code, scripts, config and prose."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            path = Path(folder) / name
            rel = path.relative_to(root)
            if path.suffix in SCANNED_SUFFIXES or "Dockerfile" in name or rel.parts[0] == ".ci":
                yield path


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(markdown: str) -> set[str]:
    """Every anchor a page defines: heading slugs (numbered on repeats) and `<a id>`s."""
    found: set[str] = set(EXPLICIT_ANCHOR.findall(markdown))
    seen: dict[str, int] = {}
    in_fence = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = None if in_fence else HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def _strip_fenced(markdown: str) -> list[str]:
    """The page's lines with fenced code blanked (links in code are not links)."""
    out, in_fence = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            out.append("")
        else:
            out.append("" if in_fence else line)
    return out


class _Pages:
    """Anchors per page, read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[Path, set[str]] = {}

    def anchors(self, page: Path) -> set[str]:
        if page not in self._cache:
            self._cache[page] = anchors_of(page.read_text(encoding="utf-8"))
        return self._cache[page]


def _check_target(
    pages: _Pages, src: str, line: int, page: Path, anchor: str | None
) -> Problem | None:
    rel = page.resolve().relative_to(pages.root.resolve()).as_posix()
    if not page.exists():
        return Problem(src, line, f"{rel} does not exist")
    if anchor is not None and page.suffix == ".md" and anchor not in pages.anchors(page):
        return Problem(src, line, f"{rel} has no section #{anchor}")
    return None


def check_repository(root: Path) -> list[Problem]:
    """Every broken docs reference and every citation of the outside design document."""
    pages, problems = _Pages(root), []
    for path in scanned_files(root):
        src = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for no, line in enumerate(text.splitlines(), 1):
            if OUTSIDE_DESIGN.search(line):
                problems.append(Problem(src, no, "cites the design handbook: cite docs/ instead"))
            for page, anchor in PATH_REF.findall(line):
                bad = _check_target(pages, src, no, root / "docs" / page, anchor)
                problems += [bad] if bad else []
        if path.suffix != ".md":
            continue
        for no, line in enumerate(_strip_fenced(text), 1):
            for target in MD_LINK.findall(line):
                if re.match(r"^[a-z][\w+.-]*:", target):  # https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                page = path if not file_part else path.parent / file_part
                bad = _check_target(pages, src, no, page, anchor or None)
                problems += [bad] if bad else []
    return problems


def test_every_cited_section_exists() -> None:
    problems = check_repository(ROOT)
    assert not problems, "broken docs references:\n" + "\n".join(map(str, problems))


# ------------------------------------------------------------- the checker on small trees


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body, encoding="utf-8")
    return tmp_path


PAGE = (
    "# The page\n\n## `pipeline doctor`: is it ready?\n\n## Setup\n\n## Setup\n\n"
    '<a id="exit-codes"></a>\n```shell\n# 1. not a heading\n```\n'
)
DEAD = "DESIGN"  # split from its number so that this file does not cite it


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"a.py": "# see D0CS/p.md#setup\n"}, []),
        ({"a.py": "# see D0CS/p.md#setup-1 and D0CS/p.md#exit-codes\n"}, []),
        ({"a.py": "# see D0CS/p.md#pipeline-doctor-is-it-ready\n"}, []),
        ({"a.py": "# see D0CS/p.md#setup-2\n"}, ["a.py:1: D0CS/p.md has no section #setup-2"]),
        ({"a.py": "# see D0CS/p.md#1-not-a-heading\n"}, ["has no section #1-not-a-heading"]),
        ({"a.sh": "# D0CS/gone.md#setup\n"}, ["a.sh:1: D0CS/gone.md does not exist"]),
        ({"x.tf": "# D0CS/p.md#nope\n"}, ["x.tf:1: D0CS/p.md has no section #nope"]),
        ({"D0CS/q.md": "[s](p.md#setup)\n[t](#top)\n\n# Top\n"}, []),
        ({"D0CS/q.md": "[s](p.md#gone)\n"}, ["D0CS/q.md:1: D0CS/p.md has no section #gone"]),
        ({"D0CS/q.md": "[s](#gone)\n"}, ["D0CS/q.md:1: D0CS/q.md has no section #gone"]),
        ({"D0CS/q.md": "[s](../nothing.py)\n"}, ["D0CS/q.md:1: nothing.py does not exist"]),
        ({"D0CS/q.md": "```\n[s](../nothing.py)\n```\n[w](https://x.org/a.md#b)\n"}, []),
        ({"README.md": "[c](D0CS/layout.md)\n"}, ["README.md:1: D0CS/layout.md does not exist"]),
        ({"a.py": f"# {DEAD} 4.2\n"}, ["a.py:1: cites the design handbook"]),
        ({"a.yaml": f"# {DEAD} section 8\n"}, ["a.yaml:1: cites the design handbook"]),
        ({"a.md": f"see {DEAD}.md\n"}, ["a.md:1: cites the design handbook"]),
    ],
)
def test_the_checker(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    files = {
        name.replace("D0CS/", "docs/"): body.replace("D0CS/", "docs/")
        for name, body in files.items()
    }
    root = _tree(tmp_path, {"docs/p.md": PAGE, **files})
    found = [str(p) for p in check_repository(root)]
    assert len(found) == len(expected), found
    for got, want in zip(found, expected, strict=True):
        assert want.replace("D0CS/", "docs/") in got


# ------------------------------------------------------------------ pipeline commands

# The predecessor's commands, named as such on the page that compares the two.
PREDECESSOR_COMMANDS = {("docs/predecessor-configs.md", "deploy")}
CODE_SPAN = re.compile(r"`([^`]+)`")
COMMAND = re.compile(r"(?:^|(?<=[\s(;&$]))pipeline\s+([a-z][\w-]*)((?:\s+[^\s]+)*)")


def _code_snippets(markdown: str) -> Iterator[tuple[int, str]]:
    """(line, code) for every code span outside fences and every line inside them."""
    in_fence = False
    for no, line in enumerate(markdown.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
        elif in_fence:
            yield no, line.split(" # ")[0]
        else:
            for span in CODE_SPAN.findall(line):
                yield no, span


def _uses(code: str) -> Iterator[tuple[str, list[str]]]:
    """(command, the words after it) for each `pipeline ...` in one piece of code."""
    for part in re.split(r"(?<!\\)\||&&|;|\$\(", code):
        m = COMMAND.search(part)
        if m:
            yield m.group(1), m.group(2).split()


def _option_names(cmd: click.Command) -> set[str]:
    names = {"--help"}
    for param in cmd.params:
        names.update(getattr(param, "opts", []))
        names.update(getattr(param, "secondary_opts", []))
    return names


def test_every_pipeline_command_in_the_docs_exists() -> None:
    from scripts.cli import main

    ctx = click.Context(main)
    problems = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        rel = page.relative_to(ROOT).as_posix()
        for no, code in _code_snippets(page.read_text(encoding="utf-8")):
            for name, words in _uses(code):
                cmd = main.get_command(ctx, name)
                if cmd is None and (rel, name) in PREDECESSOR_COMMANDS:
                    continue
                if cmd is None:
                    problems.append(f"{rel}:{no}: `pipeline {name}` is not a command")
                    continue
                if isinstance(cmd, click.Group) and words and re.fullmatch(r"[a-z]+", words[0]):
                    sub = cmd.get_command(ctx, words[0])
                    if sub is not None:
                        cmd, words = sub, words[1:]
                    elif not cmd.invoke_without_command:
                        problems.append(f"{rel}:{no}: `pipeline {name} {words[0]}` is not one")
                        continue
                options = _option_names(cmd)
                for word in words:
                    flag = re.match(r"\[?(--[a-z][\w-]*)", word)
                    if flag and flag.group(1) not in options:
                        problems.append(f"{rel}:{no}: `pipeline {name}` has no {flag.group(1)}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("pipeline status r1 -o", [("status", ["r1", "-o"])]),
        ("cd x && pipeline local up --tick 2", [("local", ["up", "--tick", "2"])]),
        ('eval "$(pipeline local env)"', [("local", ['env)"'])]),
        ("pipeline render X | kubectl apply -f -", [("render", ["X"])]),
        ("[--advance auto\\|approve]", []),
        ("cave-pipeline 0.0.4", []),
        ("pipeline.yml", []),
    ],
)
def test_uses(code: str, expected: list[tuple[str, list[str]]]) -> None:
    assert list(_uses(code)) == expected


# A repository path (`shared/views/wall_parts.py`, `terraform/alerts.tf`) or, in a code span,
# a dotted module or a name in one (`shared.chaos.chaos_plan`, `shared.chaos.chaos_plan.is_due`).
ROOMS = "shared|adapters|scripts|worker|functions|demo|bench|tests|terraform|examples"
REPO_PATH = re.compile(
    rf"(?<![\w./-])((?:{ROOMS})/[\w/.-]*\w\.(?:py|tf|sh|json|yaml|yml|md|toml))(?![\w.])"
)
DOTTED = re.compile(r"`((?:shared|adapters|scripts|worker|demo)(?:\.[A-Za-z_]\w*)+)`")
PLACEHOLDER = re.compile(r"NAME|\*|<|\{")


def _defines(source: Path, name: str) -> bool:
    """`name` is defined or imported at any level of the module `source`."""
    text = source.read_text(encoding="utf-8")
    n = re.escape(name)
    return bool(
        re.search(
            rf"^\s*(?:async\s+def|def|class)\s+{n}\b|^\s*{n}\s*[:=]|^\s*(?:from|import)\s.*\b{n}\b",
            text,
            re.M,
        )
    )


def dotted_problem(root: Path, dotted: str) -> str | None:
    """Why `dotted` names nothing in the repository (None: it names a module, a package or a
    name defined in one)."""
    if (root / dotted).exists():  # a file whose name has dots (`worker.Dockerfile`)
        return None
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:k])
        source = (
            base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
        )
        if not (source.exists() or base.is_dir()):
            continue
        rest = parts[k:]
        if not rest or (source.exists() and _defines(source, rest[0])):
            return None
        return f"{'.'.join(parts[:k])} defines no {rest[0]}"
    return f"no module {dotted}"


def cited_path_problems(root: Path) -> list[Problem]:
    """Every repository path and dotted module the code, the docs and the config cite that
    does not exist."""
    problems = []
    for path in scanned_files(root):
        src = path.relative_to(root).as_posix()
        if path.resolve() == Path(__file__).resolve():
            continue  # its examples of broken citations
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for no, line in enumerate(text.splitlines(), 1):
            for m in REPO_PATH.finditer(line):
                cited = m.group(1)
                if not PLACEHOLDER.search(cited) and not (root / cited).exists():
                    problems.append(Problem(src, no, f"{cited} does not exist"))
            for m in DOTTED.finditer(line):
                why = dotted_problem(root, m.group(1))
                if why is not None:
                    problems.append(Problem(src, no, f"`{m.group(1)}`: {why}"))
    return problems


def test_every_cited_module_and_path_exists() -> None:
    problems = cited_path_problems(ROOT)
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see shared/model/state.py", []),
        ("see shared/model/gone.py", ["shared/model/gone.py does not exist"]),
        ("cp terraform/terraform.tfvars.example x", []),  # not terraform/terraform.tf
        ("`shared.model.state`", []),
        ("`shared.model.state.RunState`", []),
        (
            "`shared.model.state.NoSuch`",
            ["`shared.model.state.NoSuch`: shared.model.state defines no NoSuch"],
        ),
        ("`shared.model.gone`", ["`shared.model.gone`: shared.model defines no gone"]),
        ("demo.model_copy(update)", []),  # code, not a citation
    ],
)
def test_the_path_checker(tmp_path: Path, text: str, expected: list[str]) -> None:
    (tmp_path / "shared" / "model").mkdir(parents=True)
    (tmp_path / "shared" / "__init__.py").write_text("")
    (tmp_path / "shared" / "model" / "__init__.py").write_text("")
    (tmp_path / "shared" / "model" / "state.py").write_text("class RunState:\n    pass\n")
    (tmp_path / "terraform").mkdir()
    (tmp_path / "terraform" / "terraform.tfvars.example").write_text("")
    (tmp_path / "docs.md").write_text(text + "\n")
    assert [p.what for p in cited_path_problems(tmp_path)] == expected

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
  docs/ (a code span or a fenced block) is a command of the CLI, with that option;
- every module, file and test the docs and the code cite exists: a repository path
  (`shared/x/y.py`, `tests/.../test_x.py::test_y`) anywhere; a dotted name of the project's
  packages (`shared.reconcile.decide`, `adapters.wiring`, a module and a name in it) in a code
  span anywhere, and in plain words in the docs' prose and the code's comments and docstrings;
  a module named by its file (`kubelet.py`) or by a path from its room
  (`controlplane/identities.py`) there too; every module docs/layout.md's rooms table names.
  The CHANGELOG is checked in its current section only: older ones name what was true then.
"""

from __future__ import annotations

import io
import os
import re
import tokenize
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


# A repository path (`shared/views/wall_parts.py`, `terraform/alerts.tf`), optionally with a
# test in it (`tests/unit/x/test_y.py::test_z`), or, in a code span, a dotted module or a name
# in one (`shared.chaos.chaos_plan`, `shared.chaos.chaos_plan.is_due`).
ROOMS = "shared|adapters|scripts|worker|functions|demo|bench|tests|terraform|examples"
# Not `functions`: its one module is cited by path, and `functions.get` is Cloud Functions' API.
PACKAGES = "shared|adapters|scripts|worker|demo|bench|tests"
REPO_PATH = re.compile(
    rf"(?<![\w./-])((?:{ROOMS})/[\w/.-]*\w\.(?:py|tf|sh|json|yaml|yml|md|toml))(?![\w.])"
    r"(?:::(\w+))?"
)
DOTTED = re.compile(rf"`((?:{PACKAGES})(?:\.[A-Za-z_]\w*)+)`")
# The same outside a code span, in prose, a comment or a docstring (`see adapters.wiring`);
# not a call (`x.model_copy(...)`), not an attribute chain of code (`x.shared.y`). Not
# `functions.` or `demo.` either: in prose those are as often the words (Cloud Functions'
# `functions.get`) as the packages.
BARE_ROOTS = "shared|adapters|scripts|worker|bench|tests"
BARE_DOTTED = re.compile(rf"(?<![\w.`/$-])((?:{BARE_ROOTS})(?:\.[A-Za-z_]\w*)+)(?![\w(`]|\.\w)")
FILE_SUFFIXES = {"py", "md", "tf", "sh", "json", "yaml", "yml", "toml", "txt", "csv", "cfg"}
# A module cited by its file name alone (`kubelet.py`) or by a path that does not start at
# the root (`controlplane/identities.py`, `reconcile/decide.py`): it must be a file of the
# repository, from the citing file's folder, from the root or as the end of a path. A path
# whose first folder is none of the repository's is another project's
# (`pychunkedgraph/...`), and so are the files named here.
SHORT_PATH = re.compile(rf"(?<![\w./$-])(?!(?:{ROOMS})/)((?:[\w-]+/)*[A-Za-z_]\w*\.py)(?![\w.])")
FOREIGN_FILES = {"server.py"}  # middle_auth's (tests/builders/middle_auth.py)
# PyChunkedGraph's own tree (docs/verify.md), which tests/builders/pcg_image/ stands in for.
FOREIGN_FOLDERS = ("pychunkedgraph/",)
PLACEHOLDER = re.compile(r"NAME|\*|<|\{")
CHANGELOG = "CHANGELOG.md"


def _defines(source: Path, name: str) -> bool:
    """`name` is defined or imported at any level of the module `source`."""
    text = source.read_text(encoding="utf-8")
    n = re.escape(name)
    return bool(
        re.search(
            rf"^\s*(?:async\s+def|def|class)\s+{n}\b|^\s*{n}\s*[:=]|^\s*(?:from|import)\s.*\b{n}\b"
            rf"|^\s*self\.{n}\s*[:=]",
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


def _prose_lines(path: Path, text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of what may cite a module in plain words: a Python file's comments and
    docstrings (not its code: `demo.x` there is a variable), any other file whole. The
    CHANGELOG only down to its second section: older entries name what was true then."""
    if path.name == CHANGELOG:
        lines = text.splitlines()
        heads = [i for i, line in enumerate(lines) if line.startswith("## ")]
        yield from enumerate(lines[: heads[1] if len(heads) > 1 else len(lines)], 1)
        return
    if path.suffix == ".md":
        yield from enumerate(_strip_fenced(text), 1)
        return
    if path.suffix != ".py":
        return
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return
    opens = {tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
    previous = tokenize.NEWLINE
    for tok in tokens:
        docstring = tok.type == tokenize.STRING and previous in opens
        if tok.type == tokenize.COMMENT or docstring:
            for k, line in enumerate(tok.string.splitlines()):
                yield tok.start[0] + k, line
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            previous = tok.type


class _Files:
    """The repository's file paths, to resolve a module cited without its folder."""

    def __init__(self, root: Path) -> None:
        self.paths = {
            p.relative_to(root).as_posix()
            for p in root.rglob("*.py")
            if not SKIPPED_DIRS.intersection(p.relative_to(root).parts)
        }
        self.folders = {part for p in self.paths for part in p.split("/")[:-1]}
        self.tails = {
            "/".join(p.split("/")[k:]) for p in self.paths for k in range(p.count("/") + 1)
        }

    def foreign(self, cited: str) -> bool:
        """`cited` is another project's file: named as one, or under a folder not ours."""
        first = cited.split("/")[0]
        return (
            cited in FOREIGN_FILES
            or cited.startswith(FOREIGN_FOLDERS)
            or ("/" in cited and first not in self.folders)
        )

    def has(self, folder: str, cited: str) -> bool:
        """`cited` is a path from `folder` or from the root, or the end of one."""
        near = f"{folder}/{cited}" if folder else cited
        return os.path.normpath(near) in self.paths or cited in self.paths or cited in self.tails


def _line_problems(
    root: Path, files: _Files, path: Path, no: int, line: str, prose: bool
) -> Iterator[Problem]:
    src = path.relative_to(root).as_posix()
    folder = path.parent.relative_to(root).as_posix()
    folder = "" if folder == "." else folder
    for m in REPO_PATH.finditer(line):
        cited, test = m.group(1), m.group(2)
        if PLACEHOLDER.search(cited):
            continue
        if not (root / cited).exists():
            yield Problem(src, no, f"{cited} does not exist")
        elif test and cited.endswith(".py") and not _defines(root / cited, test):
            yield Problem(src, no, f"{cited} has no {test}")
    for m in DOTTED.finditer(line):
        why = dotted_problem(root, m.group(1))
        if why is not None:
            yield Problem(src, no, f"`{m.group(1)}`: {why}")
    if not prose:
        return
    for m in BARE_DOTTED.finditer(line):
        if m.group(1).rsplit(".", 1)[1] in FILE_SUFFIXES or "\u01c1" in m.group(1):
            continue  # a file name (`functions.tf`); a mutant's name (`x\u01c1Outbox\u01c1...`)
        why = dotted_problem(root, m.group(1))
        if why is not None:
            yield Problem(src, no, f"{m.group(1)}: {why}")
    for m in SHORT_PATH.finditer(line):
        cited = m.group(1)
        if not files.foreign(cited) and not files.has(folder, cited):
            yield Problem(src, no, f"{cited} does not exist")


def layout_problems(root: Path) -> list[Problem]:
    """Every module docs/layout.md's table of rooms names (`decide`, `forecast/simulation/`)
    is a module or a package of one of the rooms on its line."""
    page = root / "docs" / "layout.md"
    if not page.exists():
        return []
    problems = []
    for no, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not line.lstrip().startswith("|"):
            continue
        rooms = re.findall(r"`([a-z_]+)/`", cells[1])
        if not rooms or not all((root / "shared" / r).is_dir() for r in rooms):
            continue
        for name in re.findall(r"`([a-z_]+(?:/[a-z_]+)*/?)`", cells[2]):
            stem = name.rstrip("/")
            homes = [root / "shared" / r for r in rooms] + [root / "shared"]
            if not any(
                (h / stem).with_suffix(".py").exists() or (h / stem).is_dir() for h in homes
            ):
                problems.append(
                    Problem("docs/layout.md", no, f"`{name}` is no module of {', '.join(rooms)}")
                )
    return problems


def cited_path_problems(root: Path) -> list[Problem]:
    """Every repository path and dotted module the code, the docs and the config cite that
    does not exist."""
    problems, files = [], _Files(root)
    for path in scanned_files(root):
        if path.resolve() == Path(__file__).resolve():
            continue  # its examples of broken citations
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        prose_at = dict(_prose_lines(path, text))
        for no, line in enumerate(text.splitlines(), 1):
            if path.name == CHANGELOG and no not in prose_at:
                continue  # an older section
            problems += _line_problems(
                root, files, path, no, prose_at.get(no, line), no in prose_at
            )
    return problems + layout_problems(root)


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
        ("see shared.model.state.RunState, in prose", []),
        ("see shared.model.gone.", ["shared.model.gone: shared.model defines no gone"]),
        ("terraform's functions.tf", []),
        ("the model's state.py and model/state.py", []),
        ("model/gone.py", ["model/gone.py does not exist"]),
        ("old.py, its server.py", ["old.py does not exist"]),  # server.py: middle_auth's
        ("pychunkedgraph/ingest/x.py", []),  # another project's folder
        ("tests/t/test_a.py::test_b", []),
        ("tests/t/test_a.py::test_c", ["tests/t/test_a.py has no test_c"]),
        ("```\nrm model/gone.py\n```", []),  # a command, not a citation
    ],
)
def test_the_path_checker(tmp_path: Path, text: str, expected: list[str]) -> None:
    _small_tree(tmp_path)
    (tmp_path / "docs.md").write_text(text + "\n")
    assert [p.what for p in cited_path_problems(tmp_path)] == expected


def _small_tree(tmp_path: Path) -> None:
    (tmp_path / "shared" / "model").mkdir(parents=True)
    (tmp_path / "shared" / "__init__.py").write_text("")
    (tmp_path / "shared" / "model" / "__init__.py").write_text("")
    (tmp_path / "shared" / "model" / "state.py").write_text("class RunState:\n    pass\n")
    (tmp_path / "terraform").mkdir()
    (tmp_path / "terraform" / "terraform.tfvars.example").write_text("")
    (tmp_path / "tests" / "t").mkdir(parents=True)
    (tmp_path / "tests" / "t" / "test_a.py").write_text("def test_b() -> None:\n    pass\n")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('"""See shared.model.state."""\n', []),
        ('"""See shared.model.gone."""\n', ["shared.model.gone: shared.model defines no gone"]),
        ("x = 1  # as in `shared.model.gone`\n", ["`shared.model.gone`: shared.model defines"]),
        ("# see gone.py\n", ["gone.py does not exist"]),
        ("# see state.py beside it\n", []),
        ('x = "shared.model.gone"  # a string in code\n', []),
    ],
)
def test_the_path_checker_on_code(tmp_path: Path, source: str, expected: list[str]) -> None:
    _small_tree(tmp_path)
    (tmp_path / "shared" / "model" / "use.py").write_text(source)
    found = [p.what for p in cited_path_problems(tmp_path)]
    assert len(found) == len(expected), found
    for got, want in zip(found, expected, strict=True):
        assert got.startswith(want)


def test_the_changelog_is_checked_in_its_current_section_only(tmp_path: Path) -> None:
    _small_tree(tmp_path)
    (tmp_path / "CHANGELOG.md").write_text(
        "# Changelog\n\n## Now\n\n- model/new.py\n\n## Before\n\n- model/old.py\n"
    )
    assert [str(p) for p in cited_path_problems(tmp_path)] == [
        "CHANGELOG.md:5: model/new.py does not exist"
    ]


def test_the_layout_pages_rooms_name_modules_of_their_rooms(tmp_path: Path) -> None:
    _small_tree(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "layout.md").write_text(
        "| layer | rooms | what |\n| --- | --- | --- |\n"
        "| 1 | `model/` | run state (`state`), the rest (`gone`) |\n"
    )
    assert [str(p) for p in cited_path_problems(tmp_path)] == [
        "docs/layout.md:3: `gone` is no module of model"
    ]

"""Every `docs/...md` path that the README, the docs, the experiments' notes and the code name
exists, and a section named beside it (`docs/x.md`, "Section") is a heading of that file."""
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = re.compile(r"docs/[\w./-]*?\.md")
# a section named right after the path: `docs/x.md`, "Section" or docs/x.md ("Section"
SECTION = re.compile(r"(docs/[\w./-]*?\.md)`?,? \(?\"([^\"]+)\"")


def _files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "*.md", "*.py"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    here = Path(__file__).resolve()  # its own examples name docs that are not there
    return [REPO / n for n in names if (REPO / n).is_file() and (REPO / n).resolve() != here]


def _has_section(doc: Path, section: str) -> bool:
    """A heading holds `section`, or a top-level bullet starts with it (`- Name (...)`)."""
    lines = doc.read_text().splitlines()
    return (any(section in line.lstrip("#") for line in lines if line.startswith("#"))
            or any(line[2:].lstrip("*").startswith(section) for line in lines
                   if line.startswith("- ")))


def test_every_named_doc_exists_and_its_sections_are_headings():
    files = _files()
    assert any(f.name == "README.md" for f in files) and any(f.suffix == ".py" for f in files)
    missing, sections = [], []
    for f in files:
        text = " ".join(f.read_text(errors="replace").split())  # a path or section may wrap
        where = f.relative_to(REPO)
        missing += [f"{where}: {m}" for m in DOC.findall(text) if not (REPO / m).is_file()]
        for doc, section in SECTION.findall(text):
            if (REPO / doc).is_file() and not _has_section(REPO / doc, section):
                sections.append(f"{where}: {doc}, \"{section}\"")
    assert not missing, "named but not there:\n" + "\n".join(sorted(set(missing)))
    assert not sections, "no such heading:\n" + "\n".join(sorted(set(sections)))


def test_the_check_finds_a_missing_doc_and_a_missing_section():
    text = 'see `docs/nowhere.md` and `docs/model.md`, "No such section"'
    assert DOC.findall(text) == ["docs/nowhere.md", "docs/model.md"]
    assert SECTION.findall(text) == [("docs/model.md", "No such section")]
    assert not _has_section(REPO / "docs" / "model.md", "No such section")
    assert _has_section(REPO / "docs" / "model.md", "Python API")

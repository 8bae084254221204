"""The documentation refers only to documents that ship: no "decisions.md", "the interface" or
"the guide" (documents a reader of this repository does not have) in docs/, README.md or src/, and
every `docs/*.md` it names exists. README.md starts with the two commands."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNSHIPPED = re.compile(
    r"decisions(\.md| section| §|\s+\d)|\bthe interface\b|interface's|\bthe guide\b|guide's", re.I
)


def shipped_texts() -> dict[Path, str]:
    paths = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    paths += [path for path in (ROOT / "src").rglob("*") if path.suffix in {".py", ".html", ".md"}]
    return {path: path.read_text(encoding="utf-8") for path in paths if "migrations" not in path.parts}


def test_no_reference_to_a_document_that_does_not_ship() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)}"
        for path, text in shipped_texts().items()
        for match in UNSHIPPED.finditer(text)
    ]
    assert not found, "\n".join(found)


def test_every_named_document_exists() -> None:
    named = {name for text in shipped_texts().values() for name in re.findall(r"docs/[a-z_]+\.md", text)}
    assert "docs/catalog.md" in named
    assert not [name for name in named if not (ROOT / name).exists()]


def test_the_readme_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[2] == "```sh"
    assert lines[3].startswith("make run ") and lines[4].startswith("make test ") and lines[5] == "```"
    readme = "\n".join(lines)
    for needed in (
        "## Testing your integration",
        "outfitter company create",
        "outfitter token create",
        "PORT=9000",
    ):
        assert needed in readme, needed

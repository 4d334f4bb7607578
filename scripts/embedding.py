"""What scripts/embed-schema.py and scripts/embed-assets.py share: Swift raw literals for
exact text, and writing the generated file only when it changed (so a second run changes
nothing and the build does not redo work)."""

import pathlib
import re


def raw_literal(text: str) -> str:
    """A Swift raw multi-line literal whose value is exactly `text`.

    With n '#', the literal ends at '\"\"\"' + n*'#' and escapes start with '\\' + n*'#'.
    One more '#' than the longest run of '#' in the text rules out both. The newline
    before the closing delimiter is not part of the value, and the closing delimiter sits
    in column 0, so no indentation is stripped.
    """
    longest = max((len(run) for run in re.findall(r"#+", text)), default=0)
    hashes = "#" * (longest + 1)
    return f'{hashes}"""\n{text}\n"""{hashes}'


def write_if_changed(output: pathlib.Path, content: str, tool: str, root: pathlib.Path, what: str) -> None:
    """Writes `content` to `output` unless it already holds exactly that; says which."""
    name = output.relative_to(root)
    if output.exists() and output.read_text(encoding="utf-8") == content:
        print(f"{tool}: {name} is up to date ({what})")
        return
    output.write_text(content, encoding="utf-8")
    print(f"{tool}: wrote {name} ({what})")

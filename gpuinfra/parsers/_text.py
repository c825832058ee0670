"""Text helpers shared by the parsers: what every capture goes through before it is read."""

from __future__ import annotations

import re

from gpuinfra.errors import ParseError

# Every ANSI escape family a terminal capture (`script`, a pasted tmux buffer) can carry, each
# matched in linear time (disjoint character classes, no nested repetition):
_ANSI = re.compile(
    r"\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlink (BEL or ST ends it)
    r"|\x1b[PX^_][^\x1b\n]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings (ST ends them)
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, bold, cursor moves
    r"|\x1b[ -/]*[0-~]"  # nF (charset: ESC ( B) and the two-character Fp/Fe/Fs escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # CSI in its 8-bit form
)
# No tool the parsers read prints a line this long (a 32-device `topo -m` row is ~300
# characters): a longer one is refused at once, before any parser splits it into fields.
MAX_LINE = 1 << 16
# No tool the parsers read prints a number this long (GUIDs: 16 hex digits, serials: ~13):
# longer runs are refused before any int() meets them (int() refuses > 4300 digits).
MAX_DIGITS = 64
_LONG_NUMBER = re.compile(rf"\d{{{MAX_DIGITS + 1}}}")  # any script's digits: int() reads them
_LONG_ASCII_NUMBER = re.compile(rf"[0-9]{{{MAX_DIGITS + 1}}}")  # the same, twice as fast


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (terminal captures carry bold/underline codes,
    window titles, charset switches)."""
    return _ANSI.sub("", text)


def clean_lines(text: str, source: str = "captured output") -> list[str]:
    """Lines of ``text`` with ANSI escapes and carriage returns removed, right-stripped.

    Raises ParseError (naming ``source``, the command whose output this is) at a line longer
    than :data:`MAX_LINE` characters or holding a number of more than :data:`MAX_DIGITS` digits.
    """
    lines = [line.rstrip() for line in strip_ansi(text).replace("\r", "").split("\n")]
    for no, line in enumerate(lines, 1):
        if len(line) <= MAX_DIGITS:
            continue
        if len(line) > MAX_LINE:
            raise ParseError(source, f"a line of {len(line)} characters: no {source} output "
                             f"has lines longer than {MAX_LINE}", line=no)
        match = (_LONG_ASCII_NUMBER if line.isascii() else _LONG_NUMBER).search(line)
        if match:
            end = re.match(r"\d*", line[match.end():])
            digits = MAX_DIGITS + 1 + (end.end() if end else 0)
            raise ParseError(source, f"a number of {digits} digits: no {source} output holds "
                             f"one longer than {MAX_DIGITS}", line=no)
    return lines


# A line a poster left where they cut output out: "...", "(...)", "[...]", "…", "<snip>".
ELISION = re.compile(r"^\s*(?:\.{3,}|\(\s*\.{3}\s*\)|\[\s*\.{3}\s*\]|…|<\s*snip\s*>)\s*$",
                     re.IGNORECASE)


def split_blocks(text: str, starts: re.Pattern[str], source: str
                 ) -> tuple[list[str], list[tuple[int, str]], list[str]]:
    """A capture cut into its blocks, for judging the complete ones (issue 24, section 3).

    Returns (lines before the first block header, [(first line number, block text)], the cuts
    seen: each elision line a poster left, said with its line number). ``starts`` matches a
    block's header line (stripped). Elision lines are taken out of the block they sit in: the
    block's own parser then says whether what is left is complete.
    """
    head: list[str] = []
    blocks: list[tuple[int, list[str]]] = []
    cuts: list[str] = []
    for no, line in enumerate(clean_lines(text, source), 1):
        if ELISION.match(line):
            cuts.append(f"line {no}: {line.strip()!r} (output left out by the poster)")
            continue
        if starts.match(line.strip()):
            blocks.append((no, [line]))
        elif blocks:
            blocks[-1][1].append(line)
        elif line.strip():
            head.append(line)
    return head, [(no, "\n".join(lines)) for no, lines in blocks], cuts

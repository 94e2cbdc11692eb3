"""Java ``.properties`` text (``broker.conf``, UPDATE_BROKER_CONFIG bodies): ``#``/``!`` comments, ``=``, ``:`` or
whitespace separators, backslash escapes (``\\t``, ``\\uXXXX`` ...) and line continuations. Text in, a dict out;
no I/O."""

from __future__ import annotations

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse Java ``.properties`` text: ``#``/``!`` comments, ``=``, ``:`` or whitespace separators,
    backslash escapes and line continuations."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        key_chars: list[str] = []
        j = 0
        while j < len(line):
            ch = line[j]
            if ch == "\\" and j + 1 < len(line):
                key_chars.append(_ESCAPES.get(line[j + 1], line[j + 1]))
                j += 2
                continue
            if ch in "=: \t":
                break
            key_chars.append(ch)
            j += 1
        rest = line[j:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        out["".join(key_chars)] = _unescape(rest)
    return out


def _ends_with_continuation(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _unescape(value: str) -> str:
    out: list[str] = []
    j = 0
    while j < len(value):
        ch = value[j]
        if ch == "\\" and j + 1 < len(value):
            nxt = value[j + 1]
            if nxt == "u" and j + 6 <= len(value):
                try:
                    out.append(chr(int(value[j + 2:j + 6], 16)))
                    j += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            j += 2
            continue
        out.append(ch)
        j += 1
    return "".join(out).rstrip()

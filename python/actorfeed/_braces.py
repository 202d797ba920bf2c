"""WebDataset's shard lists: "shard-{000000..000099}.tar" and "{a,b}", as
Python's braceexpand (and `actorfeed run --data`) expand them, so that a
Loader's data is checked path by path before any process starts."""

from __future__ import annotations

import re

MAX_EXPANSIONS = 1 << 20  # as the CLI's: far past any data set's shards
MAX_BRACED_BYTES = 4096  # an entry with braces: a path's most (PATH_MAX)
MAX_EXPANDED_BYTES = 64 << 20  # all the paths of one entry
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(\d+))?$")


def expand(s: str) -> list[str]:
    """The paths s stands for: itself without braces. Raises ValueError for
    a brace left open or closed unopened, a bad range, or more than
    MAX_EXPANSIONS paths."""
    open_, close = _first_brace(s)
    if open_ < 0:
        return [s]
    if len(s) > MAX_BRACED_BYTES:
        raise ValueError(f"{s!r:.40}... is {len(s)} bytes, more than a path may be ({MAX_BRACED_BYTES})")
    alts = _alternatives(s[open_ + 1:close])
    rest = expand(s[close + 1:])
    if len(alts) * len(rest) > MAX_EXPANSIONS:
        raise ValueError(f"{s!r} gives more than {MAX_EXPANSIONS} paths")
    total = len(alts) * len(rest) * open_ + sum(map(len, alts)) * len(rest) + sum(map(len, rest)) * len(alts)
    if total > MAX_EXPANDED_BYTES:
        raise ValueError(f"{s!r} gives paths of {total} bytes in all, more than {MAX_EXPANDED_BYTES}")
    return [s[:open_] + a + r for a in alts for r in rest]


def _first_brace(s: str) -> tuple[int, int]:
    depth, open_ = 0, -1
    for i, c in enumerate(s):
        if c == "{":
            if depth == 0:
                open_ = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                raise ValueError(f"{s!r} closes a brace at {i} that it did not open")
            if depth == 0:
                return open_, i
    if depth > 0:
        raise ValueError(f"{s!r} leaves the brace at {open_} open")
    return -1, -1


def _alternatives(body: str) -> list[str]:
    parts: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(body):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    m = _RANGE.match(body)
    if not parts and m:
        first, last, step = m.groups()
        return _numbers(body, first, last, step)
    literal = not parts
    out: list[str] = []
    for part in parts + [body[start:]]:
        each = expand(part)
        if len(out) + len(each) > MAX_EXPANSIONS:
            raise ValueError(f"{{{body}}} gives more than {MAX_EXPANSIONS} paths")
        out += [f"{{{e}}}" for e in each] if literal else each
    return out


def _numbers(body: str, first: str, last: str, step: str | None) -> list[str]:
    a, b, by = int(first), int(last), int(step or 1)
    if by <= 0 or not (-(1 << 63) <= a < (1 << 63) and -(1 << 63) <= b < (1 << 63)):
        raise ValueError(f"{{{body}}}: want {{first..last}} or {{first..last..step}}, integers, the step above 0")
    if abs(b - a) // by >= MAX_EXPANSIONS:
        raise ValueError(f"{{{body}}} gives more than {MAX_EXPANSIONS} paths")
    padded = any(len(n.lstrip("-")) > 1 and n.lstrip("-")[0] == "0" for n in (first, last))
    width = max(len(first), len(last)) if padded else 0
    sign = 1 if b >= a else -1
    return [f"{a + sign * i * by:0{width}d}" for i in range(abs(b - a) // by + 1)]

"""The Loader's braces expand as braceexpand, WebDataset's, does (Debian's
python3-braceexpand: CI installs it; elsewhere these tests skip without
it), and as `actorfeed run --data` does (cmd/actorfeed's braces test
checks the same patterns against braceexpand)."""

import os

import pytest

from actorfeed import _braces

if os.environ.get("CI"):
    import braceexpand
else:
    braceexpand = pytest.importorskip("braceexpand")

PATTERNS = ["s-{000000..000002}.tar", "s-{8..11}.tar", "s-{08..10}", "s-{3..1}", "s-{0..10..5}", "{a,b}-{1..2}",
            "s3://b/{train,val}/{0,1}", "{x{1..2},y}.tar", "{}{a}", "{a{1,2}}", "a{,b}", "{0..2}{a,b}{c,d}", "plain",
            "s-{-1..1}", "{-5..05}"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_braces_expand_as_braceexpand_does(pattern):
    assert _braces.expand(pattern) == list(braceexpand.braceexpand(pattern))


@pytest.mark.parametrize("pattern,message", [
    ("s-{0..9", "leaves the brace"), ("s-}", "did not open"), ("s-{0..9..0}", "step above 0"),
    ("s-{0..2000000}", "more than 1048576 paths"), ("{0..1023}{0..1023}{0,1}", "more than 1048576 paths"),
    ("d/" * 1000 + "{0..99999}", "more than 67108864"), ("{" * 3000 + "}" * 3000, "more than a path may be")])
def test_bad_braces_say_what_is_wrong(pattern, message):
    with pytest.raises(ValueError, match=message):
        _braces.expand(pattern)

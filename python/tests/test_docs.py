"""Every ```pycon block of docs/python.md preceded by <!-- doctest --> runs under Python's doctest
from the repository root (ELLIPSIS: "..." matches any text; whitespace runs compare equal)."""
import doctest
import os
import re

import pytest

from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "python.md")


def samples():
    with open(DOC, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out = []
    for i, line in enumerate(lines):
        if line.strip() != "<!-- doctest -->":
            continue
        assert lines[i + 1] == "```pycon", f"docs/python.md:{i + 1}: <!-- doctest --> must come " \
                                           "right before a ```pycon fence"
        end = lines.index("```", i + 2)
        out.append(pytest.param("\n".join(lines[i + 2:end]) + "\n", i + 3, id=f"line{i + 3}"))
    return out


SAMPLES = samples()


def test_the_page_has_tested_samples():
    assert len(SAMPLES) >= 5


@pytest.mark.parametrize("text,line", SAMPLES)
def test_sample_prints_what_it_shows(text, line, monkeypatch):
    if re.search(r"\bimport\b.*\btorch\b", text):
        pytest.importorskip("torch")
    monkeypatch.chdir(ROOT)
    test = doctest.DocTestParser().get_doctest(text, {}, f"docs/python.md:{line}", DOC, line - 1)
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    failures = []
    runner.run(test, out=failures.append)
    assert runner.failures == 0, "".join(failures)

"""Package metadata a build reads without deprecation warnings."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it():
    # The table form ``license = { text = ... }`` makes setuptools print a deprecation
    # banner on every ``pip install -e .``; the SPDX string needs setuptools >= 77.
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^license = "Apache-2\.0"$', pyproject, re.M)
    minimum = re.search(r'"setuptools>=(\d+)', pyproject)
    assert minimum and int(minimum.group(1)) >= 77

"""The HTML page's look (``_html_style``): the script's policy, the cause colours, the
``file:line`` label."""

from __future__ import annotations

import base64
import hashlib

from otel_jax._core._vocab import CAUSE_KINDS, CauseKind
from otel_jax._report import _html_style


def test_the_policy_admits_the_page_script_by_its_hash_and_loads_nothing():
    csp = _html_style._csp()
    digest = base64.b64encode(hashlib.sha256(_html_style._JS.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "img-src data:" in csp
    assert "unsafe-inline" not in csp.split("script-src", 1)[1]


def test_every_cause_kind_has_its_own_colour_and_an_unknown_one_a_fallback():
    assert set(CAUSE_KINDS) <= set(_html_style._COLOURS)
    assert _html_style._colour(CauseKind.SHAPE.value) == "#1f77b4"
    assert _html_style._colour("not-a-kind") == "#c49c94"
    assert _html_style._FIRST == CauseKind.FIRST_COMPILE.value


def test_the_location_label_is_the_file_name_and_line():
    assert _html_style._location("/src/pkg/train.py", 60) == "train.py:60"
    assert _html_style._location("/src/pkg/train.py", None) == "train.py"
    assert _html_style._location("/src/pkg/", 3) == "/src/pkg/:3"  # no base name: the path
    assert _html_style._location(None, 60) == "" and _html_style._location("", 1) == ""

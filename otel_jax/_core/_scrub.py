"""What otel_jax scrubs from the texts it emits: the one place of the rules.

Every value text otel_jax emits (causes, diffs, static-argument values,
``compile_history``, the log lines and the reports read from them) is made by
``_text.safe_repr``, which applies the active rules:

- a value whose *name* (static argument, dataclass field, dict key, keyword)
  looks sensitive is replaced whole;
- inside a repr, the value of each ``name=value``, ``'name': value`` or
  ``name: value`` pair whose name looks sensitive is replaced;
- anywhere, a value shaped like a common secret (``sk-…``, ``ghp_…``,
  ``AKIA…``, ``xox…-``, ``hf_…``, ``AIza…``, JWTs, PEM private keys, bearer
  tokens, passwords in URLs) is replaced.

A replaced value reads ``[scrubbed #a1b2]``: ``#a1b2`` is the first 16 bits of
an HMAC-SHA256 of the value under a key drawn at random when the process
starts. Within one process the same value gives the same mark, so a diff still
says *that* a scrubbed value changed (``[scrubbed #a1b2] -> [scrubbed #9f0c]``);
without the key, which never leaves the process, the mark says nothing about
the value. With ``hide_values`` every named value (static arguments, static
fields) reads ``<TypeName #a1b2>`` instead: no static value is emitted at all.

The default name patterns follow the ones trusted observability SDKs ship
(logfire's defaults, Sentry's denylist), plus ``token`` without the ML
vocabulary (``tokens``, ``max_tokens``, ``token_ids``, ``pad_token``, … are
not secrets).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._vocab import SCRUB_ENV

#: Names (of arguments, fields, keys, keywords) whose values are scrubbed;
#: regular expressions searched in the lower-cased name.
DEFAULT_NAMES: tuple[str, ...] = (
    r"passw(?:or)?d", r"passphrase", r"(?:^|[^a-z])pwd(?:$|[^a-z])", r"mysql_pwd",
    r"secret", r"credential", r"auth(?!ors?(?:$|[^a-z]))", r"cookie", r"session",
    r"api[._ -]?key", r"private[._ -]?key", r"access[._ -]?key", r"signing[._ -]?key",
    r"encryption[._ -]?key", r"bearer",
    r"(?:^|[^a-z])(?:csrf|xsrf|jwt|ssn)(?:$|[^a-z])",
    r"social[._ -]?security", r"credit[._ -]?card", r"card[._ -]?number",
    # a token, but not the tokens of a language model
    r"(?<!pad_)(?<!bos_)(?<!eos_)(?<!unk_)(?<!sep_)(?<!cls_)(?<!mask_)(?<!start_)(?<!end_)"
    r"token(?!s|i[sz]|_?(?:ids?|types?|len|length|count|num|index|idx|emb\w*)(?:$|[^a-z0-9]))",
)

#: Values shaped like common secrets, scrubbed wherever they appear.
DEFAULT_VALUES: tuple[str, ...] = (
    # OpenAI, Stripe, Anthropic
    r"\b(?:sk|rk|pk)[-_](?:live|test|proj|ant)?[-_]?[A-Za-z0-9][A-Za-z0-9_\-]{12,}",
    r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}",  # GitHub
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
    r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API key
    r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",  # JWT
    r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|(?=['\"])|$)",  # PEM
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{8,}=*",  # Authorization: Bearer ...
    r"(?<=://)[^/\s:@'\"]+:[^/\s@'\"]+(?=@)",  # https://user:password@host
)

#: Text (lower-cased) that each default value pattern cannot match without: a pattern is
#: run only on a text that holds one of its words. Python's regular expressions find a
#: literal fast but scan every position for a pattern that starts with ``\b``; texts that
#: leave the process are many and mostly hold none of these (a 16 KB diff: 11 ms -> 0.5 ms).
_NEEDS: dict[str, tuple[str, ...]] = dict(zip(DEFAULT_VALUES, (
    ("sk-", "sk_", "rk-", "rk_", "pk-", "pk_"),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ("akia", "asia"), ("xox",), ("hf_",), ("aiza",), ("glpat-",), ("eyj",),
    ("-----begin",), ("bearer",), ("://",))))

MARK = "scrubbed"
_MARK_DIGEST = re.compile(r"\[" + MARK + r" #[0-9a-f]{4}\]")


def without_digests(text: str) -> str:
    """``text`` with each mark's digest left out: digests are keyed per process, so
    texts compared across processes (fingerprints) must not contain them."""
    return _MARK_DIGEST.sub(f"[{MARK}]", text) if MARK in text else text


@dataclass(frozen=True)
class ScrubRules:
    """Which values otel_jax replaces before they leave the process.

    ``ScrubRules()`` are the defaults; ``ScrubRules().extend(names=[...],
    values=[...])`` adds patterns; ``ScrubRules(names=[...], values=[...])``
    replaces them; ``ScrubRules(hide_values=True)`` emits no static value at
    all (type and digest only). Pass them as ``otel_jax.install(scrub=...)``;
    ``install(scrub=False)`` turns scrubbing off.

    Attributes:
        names: regular expressions searched (case-insensitively) in names of
            arguments, fields, dict keys and keywords; the value of a name
            that matches is scrubbed.
        values: regular expressions of secret-shaped values, scrubbed wherever
            they appear in a text.
        hide_values: replace every named value (static arguments, static
            fields) by its type and a digest, whatever its name.
        digest: follow the mark with a short keyed digest (``#a1b2``), so that
            a changed secret still shows as a change.
    """

    names: tuple[str, ...] = DEFAULT_NAMES
    values: tuple[str, ...] = DEFAULT_VALUES
    hide_values: bool = False
    digest: bool = True
    _compiled: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for attr in ("names", "values"):
            patterns = getattr(self, attr)
            if isinstance(patterns, str) or not isinstance(patterns, Iterable):
                raise TypeError(f"ScrubRules.{attr} must be a sequence of regular "
                                f"expressions, not {type(patterns).__name__}")
            patterns = tuple(patterns)
            for p in patterns:
                if not isinstance(p, str):
                    raise TypeError(f"ScrubRules.{attr}: {p!r} is not a string")
            object.__setattr__(self, attr, patterns)
        # Compiled once here: a bad pattern fails at install, never in a compile.
        object.__setattr__(self, "_compiled", _Compiled(self))

    def extend(self, *, names: Iterable[str] = (), values: Iterable[str] = ()) -> ScrubRules:
        """These rules plus more name and value patterns."""
        return ScrubRules(names=(*self.names, *names), values=(*self.values, *values),
                          hide_values=self.hide_values, digest=self.digest)

    def sensitive_name(self, name: str) -> bool:
        """Whether a value under this name is scrubbed."""
        return bool(self._compiled.sensitive_name(name))

    def scrub(self, text: str, name: str | None = None) -> str:
        """``text`` (a value's repr) with what these rules cover replaced."""
        return str(self._compiled.scrub(text, name))

    def scrub_shaped(self, text: str) -> str:
        """``text`` (any text: a path, a dict key, a cause) with every secret-shaped part
        replaced; the name rules are left out, as they read a value's own text."""
        return str(self._compiled.scrub_shaped(text))


_KEY = os.urandom(16)


def digest(text: str) -> str:
    """Four hex digits of a keyed hash: stable in this process, meaningless outside it."""
    data = text.encode("utf-8", "surrogatepass")
    return hmac.new(_KEY, data, hashlib.sha256).hexdigest()[:4]


# A value inside a repr: a (possibly cut) quoted string, a call or container
# one level deep, or a bare token.
_VALUE = (r"(?:[rbuRBU]{0,2}'(?:[^'\\]|\\.)*(?:'|$)"
          r"|[rbuRBU]{0,2}\"(?:[^\"\\]|\\.)*(?:\"|$)"
          r"|[\w.]*\([^()]*(?:\)|$)"
          r"|\[[^\[\]]*(?:\]|$)"
          r"|\{[^{}]*(?:\}|$)"
          r"|[^\s,;)\]}]+)")
_PAIR = re.compile(
    r"(?:(?P<q>['\"])(?P<qk>[^'\"\\\n]{1,100})(?P=q)\s*:\s*"  # 'key': value (dict, JSON)
    r"|(?P<k>(?<![\w.])[A-Za-z_][\w.\-]{0,100})(?:\s*=(?!=)\s*|:\s+))"  # key=value, key: value
    r"(?P<v>" + _VALUE + ")", re.DOTALL)


_GLOBAL_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")


def _alternation(patterns: tuple[str, ...], flags: int) -> re.Pattern[str] | None:
    """One regular expression matching any of ``patterns`` (leading ``(?i)`` flags scoped)."""
    if not patterns:
        return None
    parts = []
    for p in patterns:
        re.compile(p, flags)  # each one valid on its own: the error names it
        m = _GLOBAL_FLAGS.match(p)
        parts.append(f"(?{m.group(1)}:{p[m.end():]})" if m else f"(?:{p})")
    return re.compile("|".join(parts), flags)


def _holds(text: str, words: tuple[str, ...]) -> bool:
    """Whether ``text`` holds one of ``words`` (a loop: cheaper than ``any`` over a
    generator, and this runs on every text that leaves the process)."""
    for word in words:
        if word in text:
            return True
    return False


class _Compiled:
    def __init__(self, rules: ScrubRules) -> None:
        self.rules = rules
        self.names = _alternation(rules.names, re.IGNORECASE)
        self.values = _alternation(rules.values, re.DOTALL)
        # The same patterns, each known one with the words it needs, the others together.
        self._shaped = [(_NEEDS[p], re.compile(p, re.DOTALL)) for p in rules.values
                        if p in _NEEDS]
        others = _alternation(tuple(p for p in rules.values if p not in _NEEDS), re.DOTALL)
        # Whether a text holds any of those words at all, first: most hold none.
        self._words = tuple(w for needs, _ in self._shaped for w in needs)
        self._others = [((), others)] if others is not None else []
        self._shaped += self._others
        self._name_cache: dict[str, bool] = {}

    def sensitive_name(self, name: str) -> bool:
        cached = self._name_cache.get(name)
        if cached is None:
            cached = bool(self.names is not None and self.names.search(name.lower()))
            if len(self._name_cache) > 4096:
                self._name_cache.clear()
            self._name_cache[name] = cached
        return cached

    def mark(self, value: str) -> str:
        return f"[{MARK} #{digest(value)}]" if self.rules.digest else f"[{MARK}]"

    def _pair(self, m: re.Match[str]) -> str:
        key = m.group("qk") or m.group("k")
        value = m.group("v")
        if (value == "*" or value.startswith(f"[{MARK}")  # a PyTreeDef's leaf, or done
                or not self.sensitive_name(key)):
            return m.group(0)
        return m.group(0)[: m.start("v") - m.start()] + self.mark(value)

    def scrub_shaped(self, text: str) -> str:
        first = text.lower()
        shaped = self._shaped if _holds(first, self._words) else self._others
        lowered: str | None = first
        for needs, pattern in shaped:
            if needs:
                lowered = text.lower() if lowered is None else lowered
                if not _holds(lowered, needs):
                    continue
            text = pattern.sub(lambda m: self.mark(m.group(0)), text)
            lowered = None
        return text

    def scrub(self, text: str, name: str | None = None) -> str:
        if name is not None and self.sensitive_name(name):
            return self.mark(text)
        text = self.scrub_shaped(text)
        if self.names is not None and ("=" in text or ":" in text):
            text = _PAIR.sub(self._pair, text)
        return text


DEFAULT_RULES = ScrubRules()


#: ``OTEL_JAX_SCRUB``'s values: no scrubbing, and no static value at all.
_OFF = ("off", "false", "0", "no", "none")
_HIDDEN = ("hidden", "hide", "hide_values")
_DEFAULT = ("", "on", "true", "1", "yes", "default")
STRICTEST = ScrubRules(hide_values=True)


def _from_environment() -> ScrubRules | None:
    """``OTEL_JAX_SCRUB``: ``off`` (no scrubbing), ``hidden`` (no static values), unset or
    ``default`` the defaults. Any other value is refused (``install()`` says so in one
    warning: :func:`refusal`) and the strictest rules apply: a typo of ``hidden`` must not
    show what it meant to hide."""
    global _refused
    _refused = None
    raw = os.environ.get(SCRUB_ENV, "")
    value = raw.strip().lower()
    if value in _OFF:
        return None
    if value in _HIDDEN:
        return STRICTEST
    if value in _DEFAULT:
        return DEFAULT_RULES
    _refused = raw
    return STRICTEST


def refusal() -> str | None:
    """The warning ``install()`` says when ``OTEL_JAX_SCRUB`` held a value it refused (the
    strictest rules then apply), else ``None``. Said there, not here: the warning path is
    made of this module's texts."""
    if _refused is None:
        return None
    return (f"otel_jax: {SCRUB_ENV}={_refused[:60]!r} is not one of {_HIDDEN[0]}, "
            f"{_OFF[0]} or default; the strictest rules apply (scrub=ScrubRules("
            "hide_values=True): no static value is shown).")


_UNREAD: Any = object()
#: The rules in force; ``OTEL_JAX_SCRUB`` is read at their first use, not inside ``import
#: otel_jax``, and again by each ``install()`` without ``scrub=``.
_active: ScrubRules | None = _UNREAD
#: The value of ``OTEL_JAX_SCRUB`` last refused, if the latest read refused one.
_refused: str | None = None


def configure(rules: ScrubRules | bool | None) -> None:
    """Make ``rules`` the active ones: ``None`` reads ``OTEL_JAX_SCRUB`` (default rules unless
    it says otherwise), ``True`` the default rules, ``False`` no scrubbing."""
    global _active
    if rules is None:
        _active = _from_environment()
    elif rules is True:
        _active = DEFAULT_RULES
    elif rules is False:
        _active = None
    elif isinstance(rules, ScrubRules):
        _active = rules
    else:
        raise TypeError("scrub must be an otel_jax.ScrubRules, True, False or None, "
                        f"not {type(rules).__name__}")


def active() -> ScrubRules | None:
    """The rules in force (``None``: scrubbing is off)."""
    global _active
    rules = _active
    if rules is _UNREAD:
        rules = _active = _from_environment()
    return rules

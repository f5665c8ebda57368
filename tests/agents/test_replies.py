"""Strict reading of a model's reply: each pathology is rejected for its own reason, fast."""
from __future__ import annotations

import time

import pytest
from pydantic import BaseModel

from evosyn.agents.llm.replies import parse_structured, strict_loads, unfence
from evosyn.agents.llm.types import LLMOutputError


class Answer(BaseModel):
    a: int | float | str | list | None


@pytest.mark.parametrize(("text", "reason"), [
    ('{"a": NaN}', "NaN is not JSON"),
    ('{"a": -Infinity}', "Infinity is not JSON"),
    ('{"a": 1e999}', "overflows a float"),
    ('{"a": ' + "9" * 100 + "}", "a number with 100 digits"),
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ('{"a": "\\ud800"}', "unpaired surrogate"),
    ('{"a": "\\uDC00 x"}', "unpaired surrogate"),  # upper-case escape
    ('{"a": "\ud800"}', "unpaired surrogate"),  # the surrogate itself in the text, not escaped
    ("[" * 5000 + "]" * 5000, "nested more than 64 levels"),
    ('{"a": [1, 2', "malformed JSON"),
])
def test_each_pathology_is_rejected_for_its_reason(text, reason):
    # plain json.loads accepts the first six (or raises something other than a rejection): the reason proves
    # the strict reader caught them, not a schema check further on
    with pytest.raises(LLMOutputError, match=reason):
        strict_loads(text)
    with pytest.raises(LLMOutputError, match=reason):
        parse_structured(text, Answer)  # ``a`` takes any JSON value: only the reader can refuse these


def test_a_fenced_answer_is_read_and_an_unclosed_fence_is_rejected_at_once():
    assert parse_structured('```json\n{"a": 1}\n```', Answer).a == 1
    assert unfence('```{"a": 1}```') == '{"a": 1}' and unfence('{"a": 1}') == '{"a": 1}'
    for text in ("```json" + "\n" * 200_000, "```" + " " * 200_000, "```json\n" + "\n" * 3000 + '{"a": 1}'):
        t0 = time.perf_counter()
        with pytest.raises(LLMOutputError):
            parse_structured(text, Answer)
        # the old lazy-regex fence took 1-141 s on these; linear string work takes milliseconds
        assert time.perf_counter() - t0 < 1.0


def test_brackets_inside_strings_do_not_count_as_nesting():
    """The quick count of openings includes those in strings; past it, the exact count skips strings."""
    deep_text = "[" * 500 + "{" * 500
    assert strict_loads('{"a": "%s"}' % deep_text) == {"a": deep_text}
    assert strict_loads('{"a": "\\u00e9t\\u00e9"}') == {"a": "\u00e9t\u00e9"}  # paired escapes: fine

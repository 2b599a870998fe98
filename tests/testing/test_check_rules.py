"""Every check of the three checkers rests on a protocol sentence, and its
level follows that sentence's normative word: MUST (or MUST NOT) makes it
required; SHOULD, MAY, or a convention named without a normative word,
recommended (the cancellation group is recommended too)."""

from __future__ import annotations

import pytest

from acp_trio.testing import CHECKS, CLIENT_CHECKS, Level
from acp_trio.testing._check._base import CheckInfo
from acp_trio.testing._check._report import WORDS, Rule, list_lines
from acp_trio.testing._check._v2 import V2_CHECKS

ALL = {"check-agent": CHECKS, "check-agent-v2": V2_CHECKS, "check-client": CLIENT_CHECKS}


@pytest.mark.parametrize("tool", list(ALL))
def test_each_level_follows_the_word_of_its_sentence(tool: str) -> None:
    for info in ALL[tool]:
        assert info.rule.word in WORDS, info
        assert info.rule.source, info
        assert info.rule.text, info
        required = info.level is Level.REQUIRED
        assert required is (info.rule.word in ("MUST", "MUST NOT")), info


def test_a_level_that_contradicts_its_sentence_is_refused() -> None:
    may = Rule("MAY", "cancellation", "a receiver MAY cancel the work")
    with pytest.raises(ValueError, match="'x' is required, but rests on a MAY"):
        CheckInfo("x", Level.REQUIRED, "x", may)
    must = Rule("MUST", "cancellation", "a receiver MUST answer")
    with pytest.raises(ValueError, match="'y' is cancellation, but rests on a MUST"):
        CheckInfo("y", Level.CANCELLATION, "y", must)
    with pytest.raises(ValueError, match="not 'OUGHT'"):
        Rule("OUGHT", "nowhere", "no")


def test_the_cancellation_sentences_are_the_protocol_text() -> None:
    # A receiver of $/cancel_request MAY cancel the work and its nested
    # requests, but MUST answer the request exactly once.
    rules = {info.name: info.rule for info in CHECKS}
    assert rules["cancel-request-prompt"].word == "MAY"
    assert rules["nested-cancel-request"].word == "MAY"
    assert rules["one-reply-per-request"].word == "MUST"
    assert "MUST still answer" in rules["one-reply-per-request"].text
    assert rules["session-cancel"].word == "MUST"
    assert rules["cancel-promptly"].word == "SHOULD"
    client = {info.name: info.rule for info in CLIENT_CHECKS}
    assert client["cancel-request"].word == "MUST"
    assert client["cancelled-permission"].word == "MUST"


def test_list_lines_name_each_sentence() -> None:
    lines = list_lines(CLIENT_CHECKS)
    assert len(lines) == 2 * len(CLIENT_CHECKS)
    name, rule = lines[0], lines[1]
    assert name.split()[:2] == ["initialize", "required"]
    assert rule.strip().startswith("rests on: MUST (initialization): ")
    convention = [line for line in list_lines(CHECKS) if "no normative word (JSON-RPC 2.0" in line]
    assert convention  # invalid-params, parse-error, ...


def test_the_docs_page_lists_every_check_with_its_level_and_word() -> None:
    from .conftest import REPO

    text = (REPO / "docs" / "checks.md").read_text(encoding="utf-8")
    sections = text.split("### `")[1:]
    pages = {section.split("`", 1)[0]: section for section in sections}
    assert set(pages) == set(ALL)
    for tool, infos in ALL.items():
        for info in infos:
            word = "no normative word" if info.rule.word == "none" else info.rule.word
            row = f"| `{info.name}` | {info.level.value} | {word} ({info.rule.source}): "
            assert row in pages[tool], (tool, info.name)

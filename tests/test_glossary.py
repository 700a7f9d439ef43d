"""The glossary lists each word once, with one meaning (issue 40 item 3): environment
*actions*, model *calls*, *events*; seed *disagreement* apart from baseline → candidate
*movement*; and every word a page or the report explains is in it."""

from __future__ import annotations

import re
from pathlib import Path

from replaykit.core.glossary import SHORT, TERMS, fork_call

ROOT = Path(__file__).resolve().parents[1] / "replaykit"


def test_each_word_once_and_one_meaning() -> None:
    for gone in ("steps", "llm calls", "flip rate", "re-execution flip rate"):
        assert gone not in TERMS and gone not in SHORT, gone  # the word kept: actions, model calls, disagree
    assert {"actions", "model calls", "paid calls", "event", "disagree", "movement"} <= set(TERMS)
    for word, text in [*TERMS.items(), *SHORT.items()]:
        assert not re.search(r"\bsteps?\b", text), (word, text)  # an action, a call or an epoch's round
        assert not re.search(r"\bflip", text), (word, text)  # seeds disagree; baseline → candidate moves
        assert "llm call" not in text.lower(), (word, text)


def test_every_word_a_page_explains_is_in_the_glossary() -> None:
    used: set[str] = set()
    for template in [*ROOT.glob("view/templates/*.j2"), *ROOT.glob("report/templates/*.j2")]:
        text = template.read_text()
        used |= set(re.findall(r"\bterm\('([^']+)'", text))
        used |= set(re.findall(r"TERMS\['([^']+)'\]", text))
        used |= set(re.findall(r"\bsortable\('[^']+', '([^']+)'", text))
    assert used and used <= set(TERMS), sorted(used - set(TERMS))


def test_a_fork_point_is_a_call_of_its_parents_counted_from_1() -> None:
    assert fork_call(1, 3) == "call 2 of 3"  # --at 1: one call served, live from call 2
    assert fork_call(0, 1) == "call 1 of 1"
    assert fork_call(2, None) == "call 3"  # the parent not in this store

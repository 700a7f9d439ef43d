"""The pytest plugin records a test's LLM calls on the first run and replays them after
(the pytest-recording habit); a divergence is reported once."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.cassette.store import Store
from replaykit.models.reference.server import ReferenceServer

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback

pytest_plugins = ["pytester"]

USER_TESTS = """
import os, openai, pytest


def ask(text):
    client = openai.OpenAI(base_url=os.environ["UPSTREAM"], api_key="sk-test-secret-123", max_retries=0)
    reply = client.chat.completions.create(model="reference-strong", messages=[{"role": "user", "content": text}], seed=3)
    return reply.choices[0].message

@pytest.mark.replaykit
def test_marked():
    assert ask(os.environ.get("QUESTION", "hello")).role == "assistant"

def test_fixture(replaykit_llm):
    assert ask("second test").role == "assistant"
"""


def test_records_on_first_run_then_replays_offline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    pytester.makepyfile(test_user=USER_TESTS)
    args = ("--replaykit-store", str(store), "-p", "no:cacheprovider")
    with ReferenceServer() as upstream:
        monkeypatch.setenv("UPSTREAM", upstream.base_url)
        pytester.runpytest(*args).assert_outcomes(passed=2)
    rows = Store(store).list_cassettes({"kind": "pytest"})
    assert sorted(r["task_id"] for r in rows) == ["test_user::test_fixture", "test_user::test_marked"]
    assert all(r["n_llm"] == 1 for r in rows)
    assert b"sk-test-secret-123" not in (store / "index.db").read_bytes()

    monkeypatch.setenv("UPSTREAM", "http://127.0.0.1:9/v1")  # nothing listens: only a replay can pass
    pytester.runpytest(*args, "--replaykit-record-mode", "none").assert_outcomes(passed=2)
    pytester.runpytest(*args).assert_outcomes(passed=2)  # once: recorded, so replayed

    monkeypatch.setenv("QUESTION", "something else")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    # once in the failure's report; the short summary line ("FAILED … - <message>") is
    # pytest's own and is cut to the terminal width by some versions, so leave it out
    report = text.split("short test summary info")[0]
    assert report.count("diverged at event 0") == 1, text
    assert "During handling of the above exception" not in text


def test_replay_only_without_a_recording_fails_in_one_line(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest(
        "--replaykit-store",
        str(tmp_path / "s"),
        "-p",
        "no:cacheprovider",
        "--replaykit-record-mode",
        "none",
        "-k",
        "marked",
    )
    result.assert_outcomes(errors=1)  # the fixture setup fails, in one line
    result.stdout.fnmatch_lines(
        ["*replaykit: no recording of 'test_user::test_marked'*--replaykit-record-mode once*"]
    )

import json
from pathlib import Path

STATS = Path("/app/stats.json")


def test_stats_file_exists():
    assert STATS.is_file()


def test_counts():
    assert json.loads(STATS.read_text()) == {"lines": 4, "words": 13, "chars": 77}

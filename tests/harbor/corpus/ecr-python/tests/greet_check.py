import importlib
import sys

sys.path.insert(0, "/app")


def test_greet() -> None:
    greet = importlib.import_module("greet").greet
    assert greet("ada") == "hello, ada"

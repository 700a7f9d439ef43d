import sys

sys.path.insert(0, "/app")


def test_greet() -> None:
    from greet import greet

    assert greet("ada") == "hello, ada"

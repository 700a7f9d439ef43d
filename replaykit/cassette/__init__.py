"""Cassettes, the format and the store: keys, events, the codec, the store (a package,
the only one that speaks SQL) and its backend protocol, secret scrubbing. See README.md."""

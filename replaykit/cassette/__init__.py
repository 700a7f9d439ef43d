"""Cassettes, the format and the store: keys, events, the codec, the store (the only
module that speaks SQL) and its backend protocol, secret scrubbing. See README.md."""

"""Cassettes: keys, events, the store (sqlite-utils index + content-addressed blobs),
the vcrpy recorder and, later, the proxy and bundles. See README.md in this folder."""

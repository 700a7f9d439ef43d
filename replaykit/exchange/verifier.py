"""Verifying a bundle's contents before anything is written: the manifest (format,
version, the sha256 and size of every member, the root), every blob's hash against
its name, the index rows (columns, types, duplicates), and the reference graph
(cassette ids against their keys, cached columns and run entries recomputed from
events, every reference present in the bundle).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from replaykit.cassette.integrity import (
    cassette_columns,
    cassette_mismatches,
    doc_mismatches,
    run_episode_mismatches,
    tree_manifest,
)
from replaykit.cassette.lineage import ReuseCounts, own_problems, reused_counts
from replaykit.core.run_doc import EpisodeSummary, RunDoc
from replaykit.core.tree_digest import task_tree_parts, task_tree_problem
from replaykit.exchange.bundle_format import (
    CERTIFICATE_COLUMNS,
    CERTIFICATES,
    COLUMN_RE,
    CONTENT,
    FORMAT_NAME,
    MANIFEST,
    PK,
    READ_VERSIONS,
    TABLES,
    BundleError,
    BundleManifest,
    BundleRoot,
    Members,
    Selection,
    parse_json,
)
from replaykit.exchange.refs import doc_certificates, doc_refs, episode_blobs, tree_blobs

if TYPE_CHECKING:
    from replaykit.cassette.store.schema import CassetteColumns


def check_manifest(path: Path | str, members: Members) -> BundleManifest:
    """The manifest: format and version, every member listed with its size and sha256, a valid root."""
    if MANIFEST not in members:
        raise BundleError(f"bundle {path} has no {MANIFEST}; not a replaykit bundle (or truncated)")
    manifest = parse_json(members.data[MANIFEST], f"bundle {path}: {MANIFEST}")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise BundleError(
            f"bundle {path}: {MANIFEST} does not name format {FORMAT_NAME!r}; not a replaykit bundle"
        )
    version = manifest.get("version")
    if version not in READ_VERSIONS:
        raise BundleError(
            f"bundle {path} has format version {version!r}; this replaykit reads versions"
            f" {', '.join(map(str, READ_VERSIONS))} — upgrade replaykit"
        )
    listed = manifest.get("members")
    if not isinstance(listed, dict):
        raise BundleError(f"bundle {path}: {MANIFEST} lists no members")
    for name, entry in sorted(listed.items()):
        _check_member(path, name, entry, members)
    extra = sorted(set(members.digests) - set(listed) - {MANIFEST})
    if extra:
        raise BundleError(f"bundle {path}: member {extra[0]!r} is not in the manifest; refusing")
    counts, tools = manifest.get("counts"), manifest.get("tools")
    named = _root(path, manifest.get("root"))
    if version == 1 and CERTIFICATES in members:
        raise BundleError(f"bundle {path}: a version 1 bundle holds no {CERTIFICATES}; refusing")
    return {
        "format": FORMAT_NAME,
        "version": int(version),
        "tools": tools if isinstance(tools, dict) else {},
        "root": named,
        "counts": counts if isinstance(counts, dict) else {},
        "members": listed,
    }


def _check_member(path: Path | str, name: str, entry: object, members: Members) -> None:
    """One member the manifest lists: present, of its size and sha256."""
    if name not in members:
        raise BundleError(f"bundle {path} is truncated or incomplete: member {name!r} is missing")
    size, digest = members.digests[name]
    if not isinstance(entry, dict) or entry.get("size") != size:
        raise BundleError(
            f"bundle {path}: member {name!r} has {size} bytes, the manifest says {entry.get('size') if isinstance(entry, dict) else '?'}; refusing"
        )
    if entry.get("sha256") != digest:
        raise BundleError(
            f"bundle {path}: member {name!r} does not match its sha256 in the manifest (tampered or corrupt); refusing"
        )


def _root(path: Path | str, root: object) -> BundleRoot:
    """The manifest's root: a run or cassette id (and the run's kind)."""
    if (
        not isinstance(root, dict)
        or root.get("table") not in ("runs", "cassettes")
        or not isinstance(root.get("id"), str)
    ):
        raise BundleError(f"bundle {path}: {MANIFEST} has no valid root")
    named = BundleRoot(table=str(root["table"]), id=str(root["id"]))
    if "kind" in root:
        named["kind"] = str(root["kind"])
    return named


def check_blobs(path: Path | str, members: Members, sel: Selection) -> None:
    """Every ``blobs/<sha256>`` member hashes to its name (hashed as it was spooled: ``sel.blobs``)."""
    for name, (_, digest) in members.digests.items():
        if name.startswith("blobs/") and digest != name[len("blobs/") :]:
            raise BundleError(
                f"bundle {path}: blob {name[len('blobs/') :][:12]} does not hash to its name (tampered); refusing"
            )


def load_rows(path: Path | str, members: Members, sel: Selection) -> None:
    """The index rows into ``sel.rows``: a key and a content column each, safe column names, no duplicates."""
    for table in TABLES:
        name = f"index/{table}.json"
        if name not in members:
            raise BundleError(f"bundle {path} is incomplete: member {name!r} is missing")
        rows = parse_json(members.data[name], f"bundle {path}: {name}")
        if not isinstance(rows, list):
            raise BundleError(f"bundle {path}: {name} must hold a list of rows")
        pk, content = PK[table], CONTENT[table]
        for row in rows:
            if (
                not isinstance(row, dict)
                or not isinstance(row.get(pk), str)
                or not isinstance(row.get(content), str)
            ):
                raise BundleError(f"bundle {path}: {name} holds a row without {pk!r} and {content!r}")
            bad = [
                c
                for c, v in row.items()
                if not COLUMN_RE.fullmatch(c) or not isinstance(v, (str, int, float, type(None)))
            ]
            if bad:
                raise BundleError(
                    f"bundle {path}: {name} row {row[pk]} has an invalid column {bad[0][:40]!r}; refusing"
                )
            if row[pk] in sel.rows[table]:
                raise BundleError(f"bundle {path}: {name} lists {row[pk]} twice")
            sel.rows[table][row[pk]] = row


def load_certificates(path: Path | str, members: Members, sel: Selection) -> None:
    """The certificate rows (format 2) into ``sel.certificates``: every column, of its type, once."""
    if CERTIFICATES not in members:
        return
    rows = parse_json(members.data[CERTIFICATES], f"bundle {path}: {CERTIFICATES}")
    if not isinstance(rows, list):
        raise BundleError(f"bundle {path}: {CERTIFICATES} must hold a list of rows")
    for row in rows:
        if (
            not isinstance(row, dict)
            or set(row) != set(CERTIFICATE_COLUMNS)
            or not all(
                isinstance(row[c], t) and not isinstance(row[c], bool) for c, t in CERTIFICATE_COLUMNS.items()
            )
        ):
            raise BundleError(
                f"bundle {path}: {CERTIFICATES} holds a row that is not a certificate; refusing"
            )
        if row["id"] in sel.certificates:
            raise BundleError(f"bundle {path}: {CERTIFICATES} lists {row['id']} twice")
        parse_json(str(row["doc"]).encode("utf-8"), f"bundle {path}: certificate {row['id']}'s doc")
        sel.certificates[row["id"]] = row


def check_graph(path: Path | str, sel: Selection) -> None:
    """Every reference resolved inside the bundle; cassettes and run entries checked against their events."""
    graph = _Graph(path, sel)
    root = sel.root
    if root["id"] not in sel.rows[root["table"]]:
        raise BundleError(f"bundle {path}: its root {root['id']} is not among its rows")
    for key, row in sel.rows["trees"].items():
        for digest in tree_blobs(row["manifest"], f"bundle {path}: tree {key}"):
            graph.need(digest)
        graph.task_tree(key, row)
    for key, row in sel.rows["cassettes"].items():
        graph.cassette(key, row)
    for key, row in sel.rows["runs"].items():
        graph.document(key, row)


class _Graph:
    """One bundle's references, resolved as they are checked: cassettes first (their columns
    recomputed from the events), then the documents that name them."""

    def __init__(self, path: Path | str, sel: Selection) -> None:
        self.path = path
        self.sel = sel
        self.derived: dict[str, CassetteColumns] = {}  # recomputed from the events, never trusted
        self.reused: dict[
            str, ReuseCounts
        ] = {}  # what each cassette's reuse claim counts (cassette/lineage.py)

    def need(self, digest: str) -> None:
        """The blob is in the bundle (it hashed to its name as it was read)."""
        if digest not in self.sel.blobs:
            raise BundleError(
                f"bundle {self.path}: blob {digest[:12]} is referenced but not in the bundle; refusing"
            )

    def get(self, digest: str) -> bytes:
        self.need(digest)
        return self.sel.blobs[digest]

    def task_tree(self, key: str, row: Mapping[str, object]) -> None:
        """A task folder carried as a tree (``core.tree_digest``) holds the content its name says."""
        if task_tree_parts(key) is None:
            return
        manifest = tree_manifest(str(row["manifest"]))  # checked already (tree_blobs)
        files = {p: (mode, self.get(digest)) for p, (mode, digest) in manifest.items()}
        problem = task_tree_problem(key, files)
        if problem is not None:
            raise BundleError(f"bundle {self.path}: {problem}; refusing (nothing was written)")

    def cassette(self, key: str, row: Mapping[str, object]) -> None:
        """A cassette's blobs present, its key, its columns and its reuse claim against its events."""
        where = f"bundle {self.path}: cassette {key}"
        doc = parse_json(self.get(str(row["doc"])), f"{where}: document")
        refs, episode = episode_blobs(doc, self.get, where)
        for digest in refs:
            self.need(digest)
        if episode.key.id != key:
            raise BundleError(f"{where}: its document is for cassette {episode.key.id}, not {key}; refusing")
        self.derived[key] = cassette_columns(episode)
        bad = cassette_mismatches(row, episode, self.derived[key])
        if bad:
            raise BundleError(
                f"{where}: column(s) {', '.join(bad)} do not match its events (forged or corrupt); refusing"
            )
        claim = own_problems(episode)  # what it says it was served, against its own events
        if claim:
            raise BundleError(f"{where}: {claim[0]} (forged or corrupt); refusing")
        self.reused[key] = reused_counts(episode)

    def document(self, key: str, row: Mapping[str, object]) -> None:
        """A document (run, training, verdict, ...) against its row, and all it names in the bundle."""
        where = f"bundle {self.path}: run {key}"
        doc = parse_json(self.get(str(row["doc"])), f"{where}: document")
        bad = doc_mismatches(dict(row, kind=row.get("kind") or "measure"), doc)
        if bad:
            raise BundleError(f"{where}: {'; '.join(bad)} (row and document disagree); refusing")
        if row.get("kind", "measure") == "measure":
            for entry in self.run_of(where, doc).episodes:
                self.episode_entry(where, entry)
        for cert_id in doc_certificates(doc, where):
            if cert_id not in self.sel.certificates:
                raise BundleError(f"{where} names certificate {cert_id} which is not in the bundle; refusing")
        listed = doc_refs(doc, where)
        for digest in listed.pop("blobs"):
            self.need(digest)
        for ref_table, ids in listed.items():
            for ref in ids:
                if ref not in self.sel.rows[ref_table]:
                    raise BundleError(
                        f"{where} references {ref_table[:-1]} {ref} which is not in the bundle; refusing"
                    )

    @staticmethod
    def run_of(where: str, doc: object) -> RunDoc:
        try:
            return RunDoc.read(doc)
        except ValueError as exc:
            raise BundleError(f"{where}: its document is not a run ({str(exc)[:80]}); refusing") from None

    def episode_entry(self, where: str, entry: EpisodeSummary) -> None:
        """A run's episode entry names a cassette of the bundle and agrees with its events."""
        cid = entry.cassette_id
        if cid not in self.derived and cid not in self.sel.rows["cassettes"]:
            raise BundleError(f"{where} references cassette {cid} which is not in the bundle; refusing")
        if cid not in self.derived:
            return
        wrong = run_episode_mismatches(entry, self.derived[cid], self.reused[cid])
        if wrong:
            raise BundleError(
                f"{where}: episode {cid} field(s) {', '.join(wrong)} do not match its cassette (forged or corrupt); refusing"
            )

"""``cassettes export``, ``import`` and ``verify``: move recordings between stores as verified
bundles (or vcrpy cassettes, or Inspect logs) and check a bundle or a whole store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

import typer

from replaykit import render
from replaykit.commands.options import ConfigStoreOpt, JsonOpt, StoreOpt, emit_json, open_store


def cassettes_export(
    root_id: str = typer.Argument(..., help="A run, training or cassette id (a unique prefix is enough)."),
    output: Optional[Path] = typer.Option(
        None,
        "-o",
        "--output",
        help="Bundle file (.tar.gz/.tgz: gzip; else plain tar) or, with --format vcr, a folder. Default: replaykit-<id>.tar.gz / replaykit-<id>-vcr/",
    ),
    fmt: Literal["bundle", "vcr", "inspect", "harbor"] = typer.Option(
        "bundle",
        "--format",
        help="bundle: for `replaykit cassettes import`; vcr: vcrpy YAML cassettes of the LLM calls; inspect: Inspect AI eval logs (a folder); harbor: a run as Harbor's job folder (result.json per trial and job; `harbor view DIR`).",
    ),
    base_url: Optional[str] = typer.Option(
        None,
        "--base-url",
        help="vcr: the client's base URL the uris are built from (default http://127.0.0.1:8765/v1).",
    ),
    with_images: bool = typer.Option(
        False,
        "--with-images",
        help="bundle: also carry the Docker images its cassettes ran in (docker save), so another machine certifies without a registry or a rebuild.",
    ),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Export a run, training or cassette with everything it needs: a verified bundle, or vcrpy cassettes."""
    from replaykit.exchange import bundle, vcr_export
    from replaykit.exchange.bundle_format import BundleError

    if fmt not in ("bundle", "vcr", "inspect", "harbor"):
        raise BundleError(f"unknown export format {fmt!r}; use bundle, vcr, inspect or harbor")
    if fmt == "harbor":
        from replaykit.episodes.config import load_config
        from replaykit.report.harbor_jobs import export_harbor_jobs

        pricing = load_config(config).model.pricing if config is not None else None  # cost_usd
        jobs = export_harbor_jobs(
            open_store(store, readonly=True, config=config), root_id, output or Path("jobs"), pricing
        )
        emit_json(jobs) if as_json else render.harbor_jobs(jobs)
        return
    if fmt == "inspect":
        from replaykit.commands import report as report_cmd

        return report_cmd.export_inspect(
            open_store(store, config=config), root_id, output or Path(f"replaykit-{root_id}-inspect"), as_json
        )
    if fmt == "vcr":
        written = vcr_export.export_vcr(
            open_store(store, readonly=True, config=config),
            root_id,
            output or Path(f"replaykit-{root_id}-vcr"),
            base_url or vcr_export.DEFAULT_BASE_URL,
        )
        emit_json(written) if as_json else render.vcr_export(written)
        return
    target = output or Path(f"replaykit-{root_id}.tar.gz")
    try:
        report = bundle.export_bundle(
            open_store(store, readonly=True, config=config), root_id, target, with_images=with_images
        )
    except OSError as exc:
        raise BundleError(
            f"cannot write {target}: {exc.strerror or exc}; choose another -o/--output"
        ) from exc
    emit_json(report) if as_json else render.bundle_report(report, "export")


def cassettes_import(
    bundle_file: Path = typer.Argument(..., help="A bundle from `replaykit cassettes export`."),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Verify a bundle completely, then add it to the store in one transaction (a no-op if already there)."""
    from replaykit.exchange.importer import import_bundle
    from replaykit.train.derived import verify_document

    report = import_bundle(open_store(store, config=config), bundle_file, derived=verify_document)
    emit_json(report) if as_json else render.bundle_report(report, "import")


def cassettes_verify(
    bundle_file: Optional[Path] = typer.Argument(
        None, help="A bundle from `replaykit cassettes export`; without one, the whole store is checked."
    ),
    store: Optional[str] = typer.Option(
        None, "--store", help="The store to check (with a bundle: also check the bundle against it)."
    ),
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Check a bundle without importing it, or (no bundle) every blob, row and document of a store (an fsck)."""
    if bundle_file is None:
        from replaykit.exchange.fsck import verify_store
        from replaykit.train.derived import verify_document

        result = verify_store(open_store(store, readonly=True, config=config), derived=verify_document)
        if as_json:
            emit_json(result)
        else:
            render.store_check(result)
        if not result["ok"]:
            raise typer.Exit(1)
        return
    from replaykit.exchange.importer import verify_bundle
    from replaykit.train.derived import verify_document

    against = open_store(store, readonly=True, config=config) if store or config else None
    report = verify_bundle(bundle_file, against, derived=verify_document)  # what import refuses
    emit_json(report) if as_json else render.bundle_report(report, "verify")


InsecureOpt = typer.Option(
    False,
    "--insecure",
    help="Speak plain HTTP to a registry that is not on loopback (a loopback one always gets HTTP).",
)


def _oci_ref(text: str, param: str) -> Any:
    from replaykit.exchange.oci.reference import ReferenceError, parse_ref

    try:
        return parse_ref(text)
    except ReferenceError as exc:
        raise typer.BadParameter(str(exc), param_hint=param) from None


def cassettes_push(
    root_id: str = typer.Argument(
        ..., help="A run, training, verdict, compare or cassette id (a unique prefix is enough)."
    ),
    target: str = typer.Argument(..., help="Where: oci://HOST[:PORT]/REPOSITORY:TAG."),
    sign: Optional[Path] = typer.Option(
        None, "--sign", help="Sign it with this ed25519 private key file (PEM or OpenSSH, unencrypted)."
    ),
    insecure: bool = InsecureOpt,
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Push a run, training or cassette (what its bundle holds) to an OCI registry; blobs it holds are not sent again."""
    from replaykit.exchange.oci.push import push

    ref = _oci_ref(target, "TARGET")
    st = open_store(store, readonly=True, config=config)
    with render.progress(enabled=not as_json) as progress:
        report = push(st, root_id, ref, insecure=insecure, sign_key=sign, progress=progress)
    emit_json(report) if as_json else render.push_report(report)


def cassettes_pull(
    source: str = typer.Argument(..., help="What: oci://HOST[:PORT]/REPOSITORY:TAG (or @sha256:DIGEST)."),
    verify_key: Optional[Path] = typer.Option(
        None,
        "--verify-key",
        help="Refuse it unless it is signed by this ed25519 public key (PEM, or an OpenSSH .pub line).",
    ),
    insecure: bool = InsecureOpt,
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Pull an artefact `cassettes push` made, verify everything, then import it (one transaction)."""
    from replaykit.exchange.oci.pull import pull
    from replaykit.train.derived import verify_document

    ref = _oci_ref(source, "SOURCE")
    st = open_store(store, config=config)
    with render.progress(enabled=not as_json) as progress:
        report = pull(
            st, ref, insecure=insecure, verify_key=verify_key, progress=progress, derived=verify_document
        )
    emit_json(report) if as_json else render.pull_report(report)


def reproduce(
    source: str = typer.Argument(..., help="A bundle file, or oci://HOST[:PORT]/REPOSITORY:TAG."),
    charts: Optional[Path] = typer.Option(
        None, "--charts", help="Also write each root's charts, drawn again, as SVG files into this folder."
    ),
    chart: list[str] = typer.Option(
        [],
        "--chart",
        metavar="NAME=FILE",
        help="Also write the chart NAME (as --json lists it; ROOT:NAME when several roots draw one) to FILE, .svg or .png (repeatable).",
    ),
    verify_key: Optional[Path] = typer.Option(
        None, "--verify-key", help="oci://: refuse it unless signed by this ed25519 public key."
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help="oci://: plain HTTP to a registry that is not on loopback."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Reproduce a shared bundle or artefact: import it into a scratch store, replay every root, redraw its charts."""
    from replaykit.core.errors import ConfigError
    from replaykit.report.reproduce import chart_file, from_bundle, from_registry
    from replaykit.report.reproduce import reproduce as run_reproduction

    try:  # before anything is read
        chart_files = [chart_file(c) for c in chart]
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--chart") from None
    if source.startswith("oci://"):
        fetch = from_registry(_oci_ref(source, "SOURCE"), insecure, verify_key)
    else:
        fetch = from_bundle(Path(source))
    with render.progress(enabled=not as_json) as progress:
        done = run_reproduction(source, fetch, charts, progress, chart_files)
    emit_json(done) if as_json else render.reproduction(done)
    if not done["identical"]:
        raise typer.Exit(1)

"""The viewer's ASGI app (Starlette): one GET route per page, server-rendered Jinja2,
a change token for polling, and the two static files (CSS, JS) shipped in the package.

    app = create_app(open_store(root, readonly=True))

Read-only by construction: the store is opened ``readonly`` (``PRAGMA query_only``) and
only GET/HEAD routes exist. Every page's state is in its URL (a permalink); nothing is
fetched from anywhere but this server (a Content-Security-Policy says so), and a request
under another name than the server's own is refused (``hosts.py``: DNS rebinding).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar
from urllib.parse import urlencode

from replaykit.cassette.backend import BrowseStore
from replaykit.cassette.facets import FACETS as CALL_FACETS
from replaykit.cassette.store.browsing import EPISODE_SORTS, GRADE_FILTERS, EpisodeFilters
from replaykit.core.errors import CassetteNotFound, ReplaykitError
from replaykit.core.glossary import TERMS, epoch_names
from replaykit.core.hosts import HostCheck
from replaykit.view import queries, trainings
from replaykit.view.hosts import host_guard
from replaykit.view.pages import HomePage, SearchHitRow, SearchPage
from replaykit.view.search import Searcher
from replaykit.view.tasks import task_rates

if TYPE_CHECKING:  # starlette is imported when the app is made, not with the CLI
    from starlette.requests import Request
    from starlette.responses import Response

CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"
STATIC = {"view.css": "text/css", "view.js": "text/javascript"}
#: Seconds a search waits for the index to catch up before answering with what it has.
SEARCH_WAIT = 5.0
Handler = Callable[[Any], Awaitable[Any]]


def _environment() -> Any:
    import jinja2
    from markupsafe import Markup, escape

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("replaykit.view", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.ChainableUndefined,
    )

    def snippet(text: str) -> Markup:
        return Markup(str(escape(text)).replace("\x02", "<mark>").replace("\x03", "</mark>"))

    env.filters["snippet"] = snippet
    env.filters["epochs"] = epoch_names  # e0, e2: one wording in CLI, report and viewer
    env.filters["short"] = lambda s, n=10: (s or "-")[:n]
    env.filters["seconds"] = took
    env.filters["rate"] = lambda v: "-" if v is None else f"{100 * v:.0f}%"
    env.globals["TERMS"] = TERMS
    return env


def took(seconds: float | None) -> str:
    """A recorded episode's wall-clock duration: ``0.42 s``, ``12.3 s``, ``2 min 05 s``."""
    if seconds is None:
        return "not timed when recorded"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


#: the range a numeric query parameter may take (a page from 1; a seed as a store's integer holds it)
BOUNDS: dict[str, tuple[int, int]] = {"page": (1, 1_000_000), "seed": (-(2**63), 2**63 - 1)}


def _int(value: str | None, name: str, default: int | None = None) -> int | None:
    """A whole-number query parameter within its ``BOUNDS`` (a 400 line otherwise: a 30-digit page
    reached the database and answered 500)."""
    if value in (None, ""):
        return default
    low, high = BOUNDS.get(name, (-(2**63), 2**63 - 1))
    text = str(value).strip()
    if len(text) > 20 or not text.lstrip("+-").isdigit():
        if text.lstrip("+-").isdigit():
            raise ValueError(f"{name}={text[:24]}… is out of range; use {low} to {high}")
        raise ValueError(f"{name}={value!r} is not a whole number; use e.g. {name}={max(low, 1)}")
    number = int(text)
    if not low <= number <= high:
        raise ValueError(f"{name}={number} is out of range; use {low} to {high}")
    return number


def create_app(
    store: BrowseStore,
    poll_seconds: float = 2.0,
    searcher: Searcher | None = None,
    hosts: HostCheck | None = None,
    on_index: Callable[[int, int], None] | None = None,
) -> Any:
    """The Starlette app over ``store`` (open it read-only); pages poll every ``poll_seconds``;
    only requests whose ``Host`` ``hosts`` allows are answered (default: loopback names);
    ``on_index(indexed, total)`` hears the search index catch up (the command prints it)."""
    from starlette.applications import Starlette

    routes = _Viewer(store, poll_seconds, searcher, on_index).routes()
    return _Headers(host_guard(Starlette(routes=routes), hosts or HostCheck("127.0.0.1")))


class _Viewer:
    """The pages over one store: each a method from a request to a response."""

    def __init__(
        self,
        store: BrowseStore,
        poll_seconds: float,
        searcher: Searcher | None,
        on_index: Callable[[int, int], None] | None = None,
    ) -> None:
        self.store = store
        self.poll_seconds = poll_seconds
        self.searcher = searcher  # made on the first search unless given
        self.on_index = on_index
        self.env = _environment()

    def routes(self) -> list[Any]:
        from starlette.routing import Route

        pages: list[tuple[str, Callable[[Request], Response]]] = [
            ("/", self.home),
            ("/trainings", self.trainings),
            ("/trainings/{id}", self.training),
            ("/runs", self.runs),
            ("/runs/{id}", self.run),
            ("/tasks", self.tasks),
            ("/verdicts", self.verdicts),
            ("/verdicts/{id}", self.verdict),
            ("/verdicts/{id}/diff", self.unit_diff),
            ("/compares", self.compares),
            ("/compares/{id}", self.compare),
            ("/episodes", self.episodes),
            ("/episodes/{id}", self.episode),
            ("/search", self.search),
        ]
        return [
            *(Route(path, self.guarded(fn)) for path, fn in pages),
            Route("/api/token", self.token),
            Route("/static/{name}", _static),
        ]

    def page(
        self, request: Request, template: str, title: str, ctx: Mapping[str, object], status: int = 200
    ) -> Response:
        """``ctx``: a page of ``queries`` or ``trainings`` (``pages.py``), the template's names."""
        from starlette.responses import HTMLResponse

        html = self.env.get_template(template).render(
            request=request,
            title=title,
            url=str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
            token=request.state.token if hasattr(request.state, "token") else self.store.change_token(),
            poll_ms=int(self.poll_seconds * 1000),
            query=request.query_params,
            with_query=lambda **kw: _with_query(request, **kw),
            **ctx,
        )
        return HTMLResponse(html, status_code=status)

    def guarded(self, fn: Callable[[Request], Response]) -> Handler:
        async def endpoint(request: Request) -> Response:
            # the store's token as it was before the page's queries: a commit landing while the
            # page is built then moves the token past the page's, so the next poll fetches it again
            request.state.token = self.store.change_token()
            try:
                return fn(request)
            except CassetteNotFound as exc:
                return self.page(request, "error.html.j2", "not found", {"message": str(exc)}, status=404)
            except ValueError as exc:
                return self.page(request, "error.html.j2", "bad request", {"message": str(exc)}, status=400)
            except ReplaykitError as exc:
                return self.page(request, "error.html.j2", "error", {"message": str(exc)}, status=500)
            except Exception as exc:  # a bug: one line here and on stderr, not a traceback
                line = f"viewer error on {request.url.path}: {type(exc).__name__}: {exc}"
                print(f"replaykit view: {line}", file=sys.stderr)
                return self.page(request, "error.html.j2", "error", {"message": line}, status=500)

        return endpoint

    def home(self, request: Request) -> Response:
        store = self.store
        ctx: HomePage = {
            **trainings.trainings(store),
            **queries.compares(store),
            "runs": queries.runs(store)["runs"][:10],
            "episode_count": store.episode_page({}, limit=1)[1],
        }
        return self.page(request, "home.html.j2", "replaykit view", ctx)

    def trainings(self, request: Request) -> Response:
        return self.page(request, "trainings.html.j2", "trainings", trainings.trainings(self.store))

    def training(self, request: Request) -> Response:
        ctx = trainings.training(self.store, request.path_params["id"])
        return self.page(request, "training.html.j2", f"training {ctx['training']['id']}", ctx)

    def runs(self, request: Request) -> Response:
        q = request.query_params
        ctx = queries.runs(
            self.store, q.get("model", ""), q.get("harness", ""), _int(q.get("page"), "page", 1) or 1
        )
        return self.page(request, "runs.html.j2", "runs", ctx)

    def run(self, request: Request) -> Response:
        ctx = queries.run(self.store, request.path_params["id"])
        return self.page(request, "run.html.j2", f"run {ctx['run']['id']}", ctx)

    def tasks(self, request: Request) -> Response:
        q = request.query_params
        ctx = task_rates(self.store, q.get("model", ""), q.get("harness", ""))
        return self.page(request, "tasks.html.j2", "tasks", ctx)

    def verdicts(self, request: Request) -> Response:
        ctx = queries.verdicts(self.store, request.query_params.get("movement", ""))
        return self.page(request, "verdicts.html.j2", "verdicts", ctx)

    def verdict(self, request: Request) -> Response:
        ctx = queries.verdict(self.store, request.path_params["id"])
        return self.page(request, "verdict.html.j2", f"verdict {ctx['verdict']['id']}", ctx)

    def unit_diff(self, request: Request) -> Response:
        unit = request.query_params.get("unit", "")
        if not unit:
            raise ValueError("which unit? add ?unit=TASK#SEED (a regression or new solve of the verdict)")
        full = request.query_params.get("full") == "1"
        ctx = queries.unit_diff(self.store, request.path_params["id"], unit, full=full)
        return self.page(request, "diff.html.j2", f"diff {unit}", ctx)

    def compares(self, request: Request) -> Response:
        return self.page(request, "compares.html.j2", "compare results", queries.compares(self.store))

    def compare(self, request: Request) -> Response:
        ctx = queries.compare(self.store, request.path_params["id"])
        return self.page(request, "compare.html.j2", f"compare {ctx['compare']['id']}", ctx)

    def episodes(self, request: Request) -> Response:
        q = request.query_params
        sort = q.get("sort", "created_at")
        if sort not in EPISODE_SORTS:
            raise ValueError(f"sort={sort!r} is not a column; use one of {', '.join(EPISODE_SORTS)}")
        filters = self.episode_filters(q)
        descending = q.get("dir", "desc") != "asc"
        ctx = queries.episodes(self.store, filters, sort, descending, _int(q.get("page"), "page", 1) or 1)
        ctx["unclassified"] = self.searcher.pending if q.get("facet") and self.searcher is not None else 0
        return self.page(request, "episodes.html.j2", "episodes", ctx)

    def episode_filters(self, q: Mapping[str, str]) -> EpisodeFilters:
        """The episode list's filters from its query string (``run`` names its episodes)."""
        outcome = q.get("outcome", "")
        if outcome and outcome not in GRADE_FILTERS:
            raise ValueError(f"outcome={outcome!r} is not one of {', '.join(GRADE_FILTERS)}")
        filters: EpisodeFilters = {
            "task_id": q.get("task", ""),
            "seed": _int(q.get("seed"), "seed"),
            "model": q.get("model", ""),
            "harness_sha": q.get("harness", ""),
            "outcome": outcome,
        }
        if q.get("run"):
            filters["ids"] = [e.cassette_id for e in self.store.get_run(q["run"]).episodes]
        if facet := q.get("facet", ""):
            if facet not in CALL_FACETS:
                raise ValueError(f"facet={facet!r} is not one of {', '.join(CALL_FACETS)}")
            if self.searcher is None:
                self.searcher = Searcher(self.store, progress=self.on_index)
            having = set(self.searcher.with_facet(facet, wait=SEARCH_WAIT))
            chosen = filters["ids"] if "ids" in filters and filters["ids"] is not None else sorted(having)
            filters["ids"] = [i for i in chosen if i in having]
        return filters

    def episode(self, request: Request) -> Response:
        full = request.query_params.get("full") == "1"
        ctx = queries.episode(self.store, request.path_params["id"], full=full)
        return self.page(request, "episode.html.j2", f"episode {ctx['episode']['id']}", ctx)

    def search(self, request: Request) -> Response:
        q = request.query_params.get("q", "").strip()
        pageno = _int(request.query_params.get("page"), "page", 1) or 1
        hits, total = self.search_hits(q, pageno) if q else ([], 0)
        searcher = self.searcher
        ctx: SearchPage = {
            "pending": searcher.pending if searcher is not None else 0,
            "indexed": searcher.indexed if searcher is not None else 0,
            "stored": searcher.total if searcher is not None else 0,
            "index_error": searcher.error if searcher is not None else "",
            "q": q,
            "hits": hits,
            "total": total,
            "page": pageno,
            "pages": max((total + queries.PAGE - 1) // queries.PAGE, 1),
        }
        return self.page(request, "search.html.j2", f"search {q}" if q else "search", ctx)

    def search_hits(self, q: str, pageno: int) -> tuple[list[SearchHitRow], int]:
        """One page of hits for ``q`` and their total, each naming the harness commit that ran it
        and the runs that hold it."""
        if self.searcher is None:
            self.searcher = Searcher(self.store, progress=self.on_index)
        found, total = self.searcher.search(
            q, limit=queries.PAGE, offset=(pageno - 1) * queries.PAGE, wait=SEARCH_WAIT
        )
        rows = {h["cassette_id"]: self.store.cassette_row(h["cassette_id"]) for h in found}
        shas = {cid: str(r["harness_sha"] or "") for cid, r in rows.items()}
        runs = queries.runs_holding(self.store, shas)
        hits = [
            SearchHitRow(
                **h,
                harness_sha=shas[h["cassette_id"]],
                kind=str(rows[h["cassette_id"]]["kind"] or "episode"),
                runs=runs.get(h["cassette_id"], []),
            )
            for h in found
        ]
        return hits, total

    async def token(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        return JSONResponse({"token": self.store.change_token()})


async def _static(request: Request) -> Response:
    from starlette.responses import Response

    name = request.path_params["name"]
    if name not in STATIC:
        return Response("not found", status_code=404, media_type="text/plain")
    data = resources.files("replaykit.view").joinpath("static", name).read_bytes()
    return Response(data, media_type=STATIC[name])


class _Headers:
    """ASGI wrapper: every response says what it may load (only this server) and is never cached."""

    HEADERS: ClassVar[list[tuple[bytes, bytes]]] = [
        (b"content-security-policy", CSP.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"cache-control", b"no-store"),
    ]

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self.HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _with_query(request: Any, **changes: Any) -> str:
    """This page's URL with some query parameters changed (``None`` removes one)."""
    params = dict(request.query_params)
    for key, value in changes.items():
        if value is None or value == "":
            params.pop(key, None)
        else:
            params[key] = str(value)
    return str(request.url.path) + ("?" + urlencode(params) if params else "")

"""The viewer's addresses: a run's (a simulation's) page and an episode's page.

The page routes on the URL's fragment, so every address is the one page the server serves
(``/``) with the view after ``#``: ``#/sim/RUN`` (a simulation's page, the side list holding
its arrivals; a run that is no simulation falls back to ``#/run/RUN``, its episodes listed),
``#/run/RUN`` (the side list holding the run's episodes) and ``#/episode/EPISODE_ID``. Ids are
percent-encoded whole (``:``, ``/`` and all), as ``encodeURIComponent`` does on the page.
"""

from __future__ import annotations

from urllib.parse import quote

VIEWER_PORT = 8765
"""The port ``coworkenv view`` serves at unless ``--port`` says otherwise."""
VIEWER_BASE = f"http://127.0.0.1:{VIEWER_PORT}"
"""Where ``coworkenv view`` serves by default (its ``--host`` and ``--port``)."""


def viewer_url(base: str = VIEWER_BASE, run: str | None = None,
               episode: str | None = None) -> str:
    """The viewer's address of ``episode`` (its page, the side list holding its run's
    episodes), else of ``run`` (its simulation page; a run that is no simulation shows its
    episodes), else of the viewer's home page; ``base`` is where ``coworkenv view`` serves
    (``http://HOST:PORT``, a trailing ``/`` or none).

    >>> viewer_url(run="sim-20261206-101500-123456")
    'http://127.0.0.1:8765/#/sim/sim-20261206-101500-123456'
    >>> viewer_url("http://localhost:9000/", episode="week:it-vpn.a0217:0:0")
    'http://localhost:9000/#/episode/week%3Ait-vpn.a0217%3A0%3A0'
    """
    root = base.rstrip("/") + "/"
    if episode is not None:
        return f"{root}#/episode/{quote(episode, safe='')}"
    if run is not None:
        return f"{root}#/sim/{quote(run, safe='')}"
    return root

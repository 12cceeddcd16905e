"""The library API: a run from Python (:class:`RunConfig`, :func:`run`, :func:`arun`), the
same one ``coworkenv run`` uses, and episodes driven step by step (:class:`Sessions`,
:class:`Session`, :class:`Action`, :class:`Observation`)."""

from .run import (
    EndpointUnreachableError,
    RunConfig,
    RunResult,
    arun,
    check_db,
    check_endpoint,
    resolve_tasks,
    run,
    select_tasks,
)
from .session import Action, Observation, Session, Sessions

__all__ = ["Action", "EndpointUnreachableError", "Observation", "RunConfig", "RunResult",
           "Session", "Sessions", "arun", "check_db", "check_endpoint", "resolve_tasks", "run",
           "select_tasks"]
